// A one-file receiver for Core's webhooks (billing's events, DESIGN §6.8, and IAM's audit stream, ADR 0027), and the signature check every
// receiver should make. Run it, register its address as an endpoint, give it the secret:
//
//   CORE_WEBHOOK_SECRET=whsec_… PORT=4900 node docs/examples/webhook-receiver.mjs
//
// It prints each verified event on one line and answers 200; a delivery whose signature does not
// verify is answered 400 and billing retries it. Billing's own tests check signatures with
// verifyCoreSignature below, so this is the check the tests make.
import { createHmac, timingSafeEqual } from "node:crypto";
import { createServer } from "node:http";
import { fileURLToPath } from "node:url";

/**
 * Checks `Core-Signature: t=<unix>,v1=<hex>` for a raw body: the HMAC-SHA256 of `<t>.<body>` with the
 * endpoint's secret must match one v1 value, and `t` must be at most `toleranceSeconds` old, so a
 * recorded delivery replayed later is refused. Answers null when it verifies, else why not. After a
 * secret rotation the header has one v1 per active secret (`t=…,v1=<new>,v1=<old>`): any one
 * matching is enough, so a receiver on either secret keeps verifying during the grace period.
 */
export function verifyCoreSignature(secret, header, body, nowSeconds = Math.floor(Date.now() / 1000), toleranceSeconds = 300) {
  if (typeof header !== "string" || header.length === 0) return "no Core-Signature header";
  const parts = header.split(",").map((part) => part.trim().split("="));
  const t = Number(parts.find(([key]) => key === "t")?.[1]);
  const signatures = parts.filter(([key]) => key === "v1").map(([, value]) => value ?? "");
  if (!Number.isInteger(t) || signatures.length === 0) return "malformed Core-Signature header";
  const expected = Buffer.from(createHmac("sha256", secret).update(`${t}.${body}`).digest("hex"));
  const matches = signatures.some((candidate) => {
    const given = Buffer.from(candidate);
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
  if (!matches) return "no signature matches: another secret, or a changed body";
  if (nowSeconds - t > toleranceSeconds) return `signed ${nowSeconds - t} s ago, more than ${toleranceSeconds} s: a replay`;
  return null;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const secret = process.env.CORE_WEBHOOK_SECRET;
  if (!secret) {
    console.error("Set CORE_WEBHOOK_SECRET to the endpoint's whsec_… secret");
    process.exit(1);
  }
  const seen = new Set();
  const port = Number(process.env.PORT ?? 4900);
  createServer((req, res) => {
    const chunks = [];
    req.on("data", (chunk) => chunks.push(chunk));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      const refused = verifyCoreSignature(secret, req.headers["core-signature"], body);
      if (refused) {
        console.error(`refused: ${refused}`);
        res.writeHead(400).end(refused);
        return;
      }
      const event = JSON.parse(body);
      // deliveries are at least once: an id seen before is answered 200 and not acted on again
      const again = seen.has(event.id);
      seen.add(event.id);
      console.log(`${again ? "again" : "event"} ${event.id} ${event.type} ${JSON.stringify(event.data).slice(0, 120)}`);
      res.writeHead(200, { "content-type": "application/json" }).end('{"received":true}');
    });
  }).listen(port, "127.0.0.1", () => console.log(`listening on http://127.0.0.1:${port}`));
}
