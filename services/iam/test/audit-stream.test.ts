import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { eq, sql } from "drizzle-orm";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createLogger, silentLogger } from "@core/kit";
import { testDatabases, type DatabaseHandle } from "@core/storage";
import { retryDelayMs } from "@core/webhooks";
import { verifyCoreSignature } from "../../../docs/examples/webhook-receiver.mjs";
import { AuditLog } from "../src/audit.js";
import { auditDispatcher } from "../src/audit-stream.js";
import { auditEndpoints } from "../src/db/schema.js";
import { call, createIam, joinOrg, operator, signIn, signUp, tenantOrg, uniqueSlug, type Iam, type Operator } from "./support/harness.js";

interface Received {
  path: string;
  eventId: string;
  type: string;
  body: string;
  signature: string;
  userAgent: string;
}

/** A receiver on 127.0.0.1 whose answers the test decides; each endpoint of a test has a path of its own. */
async function receiver() {
  const received: Received[] = [];
  let answer: (r: Received) => number = () => 200;
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      const parsed = JSON.parse(body) as { id: string; type: string };
      const r = { path: req.url ?? "", eventId: parsed.id, type: parsed.type, body, signature: String(req.headers["core-signature"]), userAgent: String(req.headers["user-agent"]) };
      received.push(r);
      const status = answer(r);
      res.writeHead(status, { "content-type": "text/plain" }).end(status === 200 ? "ok" : "not now");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    received,
    answer: (fn: typeof answer) => {
      answer = fn;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

interface Endpoint {
  id: string;
  secret: string;
  url: string;
  orgId: string | null;
  events: string[] | null;
}

/**
 * IAM's audit log streamed out (ADR 0027): endpoints operators and owners register under
 * /api/audit/endpoints, each audit event written to the shared outbox with the event, and the
 * shared dispatcher sending it signed, retried and recorded as billing's webhooks are.
 */
describe.each(testDatabases())("audit stream on $name", ({ open }) => {
  let database: DatabaseHandle;
  let iam: Iam;
  let op: Operator;
  let hooks: Awaited<ReturnType<typeof receiver>>;
  const made: { id: string; token: string }[] = [];
  beforeAll(async () => {
    database = await open();
    // sessions outlive the clock advances of retries and rotation
    iam = await createIam(database, { config: { sessionSeconds: 30 * 86_400 } });
    op = await operator(iam);
    hooks = await receiver();
  });
  afterAll(async () => {
    await hooks?.close();
    await database?.close();
  });
  // each test's endpoints are removed after it, so the next one's events go to its own only
  afterEach(async () => {
    for (const { id, token } of made.splice(0)) await call(iam, "DELETE", `/api/audit/endpoints/${id}`, { token });
  });

  let paths = 0;
  async function endpoint(by: { token: string }, body: Record<string, unknown> = {}): Promise<Endpoint> {
    const r = await call(iam, "POST", "/api/audit/endpoints", { token: by.token, body: { url: `${hooks.base}/hooks/${++paths}`, ...body } });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    made.push({ id: r.body.id, token: by.token });
    return r.body as Endpoint;
  }
  const dispatcher = (options: Partial<Parameters<typeof auditDispatcher>[3]> = {}) => auditDispatcher(database.db, iam.clock, silentLogger(), { allowPrivate: true, timeoutMs: 2_000, ...options });
  const receivedBy = (ep: Endpoint) => hooks.received.filter((r) => r.path === new URL(ep.url).pathname);
  const deliveriesOf = async (ep: Endpoint, by: { token: string } = op) => {
    const r = await call(iam, "GET", `/api/audit/endpoints/${ep.id}/deliveries?limit=100`, { token: by.token });
    expect(r.status).toBe(200);
    return r.body.data as { status: string; eventType: string; attempts: { attempt: number; status: number | null; response: string }[]; nextAttemptAt: number | null }[];
  };
  /** an audit event in `orgId`: its owner maps a new role there (role.upsert) */
  async function roleChange(org: { orgId: string; owner: { token: string } }) {
    const role = uniqueSlug("r");
    const r = await call(iam, "POST", "/api/core/roles", { token: org.owner.token, body: { orgId: org.orgId, role, permissions: [] } });
    expect(r.status).toBe(200);
    return role;
  }
  const signedAt = (r: Received) => Number(/t=(\d+)/.exec(r.signature)![1]);

  describe("endpoints", () => {
    it("an operator registers one and sees its whsec_ secret once; list and get never show it; the change is audited without it", async () => {
      const ep = await endpoint(op, { events: ["audit.auth.sign_in"], description: "siem" });
      expect(ep).toEqual({
        id: expect.stringMatching(/^we_/),
        url: expect.stringContaining("/hooks/"),
        events: ["audit.auth.sign_in"],
        description: "siem",
        orgId: null,
        secret: expect.stringMatching(/^whsec_[\w-]{43}$/),
        createdAt: expect.any(Number),
        previousSecretExpiresAt: null,
      });
      const list = await call(iam, "GET", "/api/audit/endpoints", { token: op.token });
      const { secret: _, ...shown } = ep;
      expect(list.body.data).toContainEqual(shown);
      const one = await call(iam, "GET", `/api/audit/endpoints/${ep.id}`, { token: op.token });
      expect(one.body).toEqual(shown);
      const audit = await call(iam, "GET", `/api/audit/events?action=audit_endpoint.create&limit=100`, { token: op.token });
      const created = audit.body.data.find((e: { targetId: string }) => e.targetId === ep.id);
      expect(created).toMatchObject({ actorId: op.userId, outcome: "success", targetType: "audit_endpoint", metadata: { url: ep.url, events: ["audit.auth.sign_in"] } });
      for (const body of [list.body, one.body, audit.body]) expect(JSON.stringify(body)).not.toContain(ep.secret);
    });

    it("refuses what is not an http(s) URL, malformed event types and unknown fields (400); an unknown organization is 404", async () => {
      for (const body of [
        { url: "ftp://hooks.example.com" },
        { url: "https://hooks.example.com", events: ["auth.sign_in"] },
        { url: "https://hooks.example.com", events: ["audit.Auth"] },
        { url: "https://hooks.example.com", events: ["audit.auth.sign_in", "audit.auth.sign_in"] },
        { url: "https://hooks.example.com", events: [] },
        { url: "https://hooks.example.com", secret: "mine" },
      ]) {
        const r = await call(iam, "POST", "/api/audit/endpoints", { token: op.token, body });
        expect(r.status, JSON.stringify(body)).toBe(400);
        expect(r.body.error.code).toBe("VALIDATION_ERROR");
      }
      const r = await call(iam, "POST", "/api/audit/endpoints", { token: op.token, body: { url: "https://hooks.example.com", orgId: "org_missing" } });
      expect(r.status).toBe(404);
      expect((await call(iam, "GET", "/api/audit/endpoints")).status).toBe(401);
    });

    it("refuses a loopback or private address at registration unless CORE_IAM_WEBHOOK_ALLOW_PRIVATE, without saying a secret", async () => {
      const strict = await createIam(database, { config: { auditWebhookAllowPrivate: false } });
      for (const url of ["http://127.0.0.1:9/x", "http://localhost/x", "http://[::1]/x", "http://10.1.2.3/x", "http://169.254.169.254/latest"]) {
        const r = await call(strict, "POST", "/api/audit/endpoints", { token: op.token, body: { url } });
        expect(r.status, url).toBe(400);
        expect(r.body.error.message).toContain("CORE_IAM_WEBHOOK_ALLOW_PRIVATE=1");
      }
    });
  });

  describe("deliveries", () => {
    it("delivers each audit event signed, with the event as the audit API answers it; Stripe-style Core-Signature verifies", async () => {
      const ep = await endpoint(op, { events: ["audit.auth.sign_up"] });
      const ada = await signUp(iam);
      await dispatcher().pass();
      const got = receivedBy(ep);
      expect(got).toHaveLength(1);
      const [r] = got;
      expect(verifyCoreSignature(ep.secret, r!.signature, r!.body, signedAt(r!))).toBeNull();
      expect(verifyCoreSignature("whsec_another", r!.signature, r!.body, signedAt(r!))).toMatch(/no signature matches/);
      expect(r!.userAgent).toBe("core-iam-webhooks/1");
      const body = JSON.parse(r!.body);
      expect(body).toEqual({ id: expect.stringMatching(/^evt_/), type: "audit.auth.sign_up", createdAt: body.data.at, data: expect.objectContaining({ action: "auth.sign_up", actorId: ada.userId }) });
      // the one definition: what the audit API answers for the event is what was delivered
      const read = await call(iam, "GET", `/api/audit/events/${body.data.id}`, { token: op.token });
      expect(body.data).toEqual(read.body);
      expect((await deliveriesOf(ep))[0]).toMatchObject({ status: "delivered", eventType: "audit.auth.sign_up", attempts: [{ attempt: 1, status: 200, response: "ok" }] });
    });

    it("a failing receiver is retried with billing's backoff until it answers; every attempt is in the delivery history", async () => {
      const ep = await endpoint(op, { events: ["audit.auth.sign_up"] });
      let calls = 0;
      hooks.answer((r) => (r.path === new URL(ep.url).pathname && ++calls <= 2 ? 503 : 200));
      try {
        await signUp(iam);
        const d = dispatcher();
        await d.pass();
        expect(calls).toBe(1);
        expect((await deliveriesOf(ep))[0]).toMatchObject({ status: "pending", nextAttemptAt: expect.any(Number) });
        // not due yet: nothing is sent before its time
        await d.pass();
        expect(calls).toBe(1);
        iam.clock.advance(retryDelayMs(1) + 1000);
        await d.pass();
        iam.clock.advance(retryDelayMs(2) + 1000);
        await d.pass();
        expect(calls).toBe(3);
      } finally {
        hooks.answer(() => 200);
      }
      const [delivery] = await deliveriesOf(ep);
      expect(delivery!.status).toBe("delivered");
      expect(delivery!.attempts.map((a) => [a.attempt, a.status, a.response])).toEqual([
        [1, 503, "not now"],
        [2, 503, "not now"],
        [3, 200, "ok"],
      ]);
      const got = receivedBy(ep);
      expect(new Set(got.map((r) => r.eventId)).size).toBe(1);
      for (const r of got) expect(verifyCoreSignature(ep.secret, r.signature, r.body, signedAt(r))).toBeNull();
    });

    it("an event-type filter takes exact actions and prefixes; a new action needs no list", async () => {
      const byPrefix = await endpoint(op, { events: ["audit.role.*"] });
      const exact = await endpoint(op, { events: ["audit.auth.sign_up"] });
      const everything = await endpoint(op);
      const org = await tenantOrg(iam, op);
      await roleChange(org);
      // an action no list names: the audit log takes any action string, and so does the stream
      await new AuditLog(database.db, iam.clock, silentLogger()).record({ action: "role.brand_new" as never, outcome: "success", actorType: "system", orgId: org.orgId });
      // a prefix ends at a dot: audit.role.* does not take audit.roles_shadow.x
      await new AuditLog(database.db, iam.clock, silentLogger()).record({ action: "roles_shadow.x" as never, outcome: "success", actorType: "system", orgId: org.orgId });
      await dispatcher().pass();
      expect(receivedBy(byPrefix).map((r) => r.type).sort()).toEqual(["audit.role.brand_new", "audit.role.upsert"]);
      expect(receivedBy(exact).map((r) => r.type)).toEqual(["audit.auth.sign_up"]);
      expect(receivedBy(everything).map((r) => r.type)).toEqual(expect.arrayContaining(["audit.auth.sign_up", "audit.organization.create", "audit.role.upsert", "audit.role.brand_new"]));
    });

    it("two dispatchers at once never send the same attempt: every event arrives once", async () => {
      const ep = await endpoint(op, { events: ["audit.auth.sign_up"] });
      for (let i = 0; i < 12; i++) await signUp(iam);
      await Promise.all([dispatcher().pass(), dispatcher().pass()]);
      const got = receivedBy(ep);
      expect(got).toHaveLength(12);
      expect(new Set(got.map((r) => r.eventId)).size).toBe(12);
      const deliveries = await deliveriesOf(ep);
      expect(deliveries.every((d) => d.status === "delivered" && d.attempts.length === 1)).toBe(true);
    });

    it("rotation: both secrets sign during the grace, then the new one alone; the rotation is audited without a secret", async () => {
      const ep = await endpoint(op, { events: ["audit.auth.sign_up"] });
      const rotated = await call(iam, "POST", `/api/audit/endpoints/${ep.id}/rotate-secret`, { token: op.token, body: { expiresInSeconds: 3600 } });
      expect(rotated.status).toBe(200);
      expect(rotated.body.secret).toMatch(/^whsec_/);
      expect(rotated.body.secret).not.toBe(ep.secret);
      await signUp(iam);
      await dispatcher().pass();
      const [during] = receivedBy(ep);
      expect(during!.signature).toMatch(/^t=\d+,v1=[0-9a-f]{64},v1=[0-9a-f]{64}$/);
      expect(verifyCoreSignature(rotated.body.secret, during!.signature, during!.body, signedAt(during!))).toBeNull();
      expect(verifyCoreSignature(ep.secret, during!.signature, during!.body, signedAt(during!))).toBeNull();
      iam.clock.advance(3601_000);
      await signUp(iam);
      await dispatcher().pass();
      const after = receivedBy(ep)[1]!;
      expect(after.signature).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
      expect(verifyCoreSignature(rotated.body.secret, after.signature, after.body, signedAt(after))).toBeNull();
      expect(verifyCoreSignature(ep.secret, after.signature, after.body, signedAt(after))).toMatch(/no signature matches/);
      const audit = await call(iam, "GET", `/api/audit/events?action=audit_endpoint.rotate_secret&limit=100`, { token: op.token });
      expect(audit.body.data.find((e: { targetId: string }) => e.targetId === ep.id)).toMatchObject({ metadata: { expiresInSeconds: 3600 } });
      expect(JSON.stringify(audit.body)).not.toContain(rotated.body.secret);
      expect(JSON.stringify(audit.body)).not.toContain(ep.secret);
    });

    it("without CORE_IAM_WEBHOOK_ALLOW_PRIVATE, a name that resolves to a private address is not sent to, and the history says why", async () => {
      const host = `${uniqueSlug("hooks")}.example.com`;
      const port = new URL(hooks.base).port;
      const ep = await endpoint(op, { url: `http://${host}:${port}/named`, events: ["audit.auth.sign_up"] });
      await signUp(iam);
      await dispatcher({ allowPrivate: false, resolve: async () => ["10.0.0.7"] }).pass();
      const [delivery] = await deliveriesOf(ep);
      expect(delivery!.status).toBe("pending");
      expect(delivery!.attempts[0]).toMatchObject({ status: null, response: `not sent: ${host} resolves to 10.0.0.7, a loopback or private address (CORE_IAM_WEBHOOK_ALLOW_PRIVATE)` });
      expect(hooks.received.filter((r) => r.path === "/named")).toEqual([]);
    });

    it("a removed endpoint gets nothing more: its pending deliveries end as failed, its history stays readable", async () => {
      const ep = await endpoint(op, { events: ["audit.auth.sign_up"] });
      await signUp(iam);
      const removed = await call(iam, "DELETE", `/api/audit/endpoints/${ep.id}`, { token: op.token });
      expect(removed.body).toEqual({ id: ep.id, deleted: true });
      made.splice(0);
      await dispatcher().pass();
      expect(receivedBy(ep)).toEqual([]);
      expect((await deliveriesOf(ep))[0]).toMatchObject({ status: "failed", attempts: [] });
      expect((await call(iam, "DELETE", `/api/audit/endpoints/${ep.id}`, { token: op.token })).status).toBe(404);
      expect((await call(iam, "POST", `/api/audit/endpoints/${ep.id}/rotate-secret`, { token: op.token })).status).toBe(404);
    });

    it("writing the audit event never fails for the request, even when the outbox cannot be written", async () => {
      const lines: string[] = [];
      const log = new AuditLog(database.db, iam.clock, createLogger("iam", "info", { write: (line: string) => void lines.push(line) }));
      await endpoint(op);
      await database.db.execute(sql`alter table iam.webhook_events rename to webhook_events_away`);
      try {
        await log.record({ action: "auth.sign_in", outcome: "failure", actorType: "anonymous", targetType: "email", targetId: "outbox-gone@example.com", ip: "203.0.113.78" });
      } finally {
        await database.db.execute(sql`alter table iam.webhook_events_away rename to webhook_events`);
      }
      const events = await call(iam, "GET", `/api/audit/events?action=auth.sign_in&limit=100`, { token: op.token });
      expect(events.body.data.some((e: { targetId: string }) => e.targetId === "outbox-gone@example.com")).toBe(true);
      const text = lines.join("");
      expect(text).toContain("audit event not written to the webhook outbox");
      expect(text).not.toContain("outbox-gone@example.com");
      expect(text).not.toContain("203.0.113.78");
    });
  });

  describe("organization scope", () => {
    it("an owner's endpoint gets only their organization's events; an operator's gets every organization's", async () => {
      const [a, b] = [await tenantOrg(iam, op), await tenantOrg(iam, op)];
      const mine = await endpoint(a.owner, { events: ["audit.role.*"] });
      expect(mine.orgId).toBe(a.orgId);
      const all = await endpoint(op, { events: ["audit.role.*"] });
      const [roleA, roleB] = [await roleChange(a), await roleChange(b)];
      await dispatcher().pass();
      const data = (rs: Received[]) => rs.map((r) => JSON.parse(r.body).data as { orgId: string; targetId: string });
      expect(data(receivedBy(mine))).toEqual([expect.objectContaining({ orgId: a.orgId, targetId: roleA })]);
      expect(data(receivedBy(all)).map((d) => d.targetId).sort()).toEqual([roleA, roleB].sort());
      // the owner's history is theirs to read too
      expect(await deliveriesOf(mine, a.owner)).toHaveLength(1);
    });

    it("a member's sign-ins and failed sign-ins, which are in no organization, go to each organization of that member and to no other", async () => {
      const [a, b] = [await tenantOrg(iam, op), await tenantOrg(iam, op)];
      const person = await joinOrg(iam, a.orgId, a.owner);
      const [mineA, mineB] = [await endpoint(a.owner, { events: ["audit.auth.sign_in"] }), await endpoint(b.owner, { events: ["audit.auth.sign_in"] })];
      await signIn(iam, person);
      const wrong = await call(iam, "POST", "/api/auth/sign-in/email", { headers: { origin: iam.origin }, body: { email: person.email, password: "not-the-password" } });
      expect(wrong.status).toBe(401);
      // an address nobody has: operators' endpoints only
      await call(iam, "POST", "/api/auth/sign-in/email", { headers: { origin: iam.origin }, body: { email: "nobody-at-all@example.com", password: "not-the-password" } });
      await dispatcher().pass();
      const data = receivedBy(mineA).map((r) => JSON.parse(r.body).data as { orgId: string | null; outcome: string; actorId: string | null; targetId: string | null });
      // delivery order is not promised (ADR 0027): which events, not in what order
      expect(data.map((d) => d.outcome).sort()).toEqual(["failure", "success"]);
      expect(data.every((d) => d.orgId === null && (d.actorId === person.userId || d.targetId === person.email))).toBe(true);
      expect(receivedBy(mineB)).toEqual([]);
    });

    it("an owner cannot register for another organization, nor see, change or remove endpoints outside their own", async () => {
      const [a, b] = [await tenantOrg(iam, op), await tenantOrg(iam, op)];
      const other = await call(iam, "POST", "/api/audit/endpoints", { token: a.owner.token, body: { url: `${hooks.base}/x`, orgId: b.orgId } });
      expect(other.status).toBe(403);
      const theirs = await endpoint(b.owner);
      const operators = await endpoint(op);
      for (const ep of [theirs, operators]) {
        expect((await call(iam, "GET", `/api/audit/endpoints/${ep.id}`, { token: a.owner.token })).status).toBe(404);
        expect((await call(iam, "GET", `/api/audit/endpoints/${ep.id}/deliveries`, { token: a.owner.token })).status).toBe(404);
        expect((await call(iam, "POST", `/api/audit/endpoints/${ep.id}/rotate-secret`, { token: a.owner.token })).status).toBe(404);
        expect((await call(iam, "DELETE", `/api/audit/endpoints/${ep.id}`, { token: a.owner.token })).status).toBe(404);
      }
      const list = await call(iam, "GET", "/api/audit/endpoints", { token: a.owner.token });
      expect(list.body.data).toEqual([]);
      expect((await call(iam, "GET", `/api/audit/endpoints?orgId=${b.orgId}`, { token: a.owner.token })).status).toBe(403);
      // an operator sees both, and one organization's on asking
      const scoped = await call(iam, "GET", `/api/audit/endpoints?orgId=${b.orgId}`, { token: op.token });
      expect(scoped.body.data.map((e: { id: string }) => e.id)).toEqual([theirs.id]);
      // the endpoints are untouched
      const [row] = await database.db.select().from(auditEndpoints).where(eq(auditEndpoints.id, theirs.id));
      expect(row).toMatchObject({ disabledAt: null, secret: theirs.secret });
    });

    it("an admin or a member of the organization cannot register, list or read endpoints (403)", async () => {
      const a = await tenantOrg(iam, op);
      for (const role of ["admin", "member"] as const) {
        const person = await joinOrg(iam, a.orgId, a.owner, role);
        const created = await call(iam, "POST", "/api/audit/endpoints", { token: person.token, body: { url: `${hooks.base}/x` } });
        expect(created.status, role).toBe(403);
        expect((await call(iam, "GET", "/api/audit/endpoints", { token: person.token })).status, role).toBe(403);
      }
      const outsider = await signUp(iam);
      expect((await call(iam, "POST", "/api/audit/endpoints", { token: outsider.token, body: { url: `${hooks.base}/x` } })).status).toBe(403);
    });
  });
});
