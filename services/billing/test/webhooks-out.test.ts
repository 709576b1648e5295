import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { and, eq } from "drizzle-orm";
import Stripe from "stripe";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { silentLogger } from "@core/kit";
import { testDatabases } from "@core/storage";
import { verifyCoreSignature } from "../../../docs/examples/webhook-receiver.mjs";
import { operatorAudit, webhookDeliveries, webhookEndpoints } from "../src/db/schema.js";
import { RETRY_FOR_MS, WebhookDispatcher, retryDelayMs } from "../src/webhooks/dispatcher.js";
import { startBilling, unique, type Billing } from "./support/billing.js";

interface Received {
  eventId: string;
  type: string;
  body: string;
  signature: string;
}

/** A receiver on 127.0.0.1 whose answers the test decides: a status, or no answer at all. */
async function receiver() {
  const received: Received[] = [];
  let answer: (r: Received) => number | "hang" = () => 200;
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      const parsed = JSON.parse(body) as { id: string; type: string };
      const r = { eventId: parsed.id, type: parsed.type, body, signature: String(req.headers["core-signature"]) };
      received.push(r);
      const status = answer(r);
      if (status === "hang") return; // the dispatcher times out
      res.writeHead(status, { "content-type": "text/plain" }).end(status === 200 ? "ok" : "not now");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`,
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

/** Stripe's own verifier (the SDK's): it parses `t=…,v1=…,v1=…` and accepts a payload when one v1 matches the secret. */
const stripeWebhooks = new Stripe("sk_test_signing_only_0000").webhooks;
/** Whether Stripe's verifier accepts the delivery with `secret`, as received at the time it was signed. */
function stripeAccepts(secret: string, r: { signature: string; body: string }): boolean {
  const t = Number(/t=(\d+)/.exec(r.signature)![1]);
  try {
    stripeWebhooks.constructEvent(r.body, r.signature, secret, 300, undefined, t * 1000);
    return true;
  } catch {
    return false;
  }
}
/** The header's parts as a receiver parses them: one t, then each v1 signature in order. */
function parsedSignature(header: string): { t: number; v1: string[] } {
  expect(header).toMatch(/^t=\d+(,v1=[0-9a-f]{64})+$/);
  const parts = header.split(",").map((p) => p.split("=") as [string, string]);
  return { t: Number(parts[0]![1]), v1: parts.slice(1).map(([, v]) => v) };
}

/**
 * Billing's events out (DESIGN §6.8): endpoints operators manage, an outbox written with each
 * change, and deliveries signed per attempt and retried for three days by a dispatcher every replica
 * runs.
 */
describe.each(testDatabases())("webhooks out ($name)", (database) => {
  let b: Billing;
  let op: Record<string, string>;
  let hooks: Awaited<ReturnType<typeof receiver>>;
  const endpoints: string[] = [];
  beforeAll(async () => {
    [b, hooks] = await Promise.all([startBilling(database, { testClock: true }), receiver()]);
    op = b.as.operator();
  });
  afterAll(async () => {
    await b?.close();
    await hooks?.close();
  });

  /** An endpoint for the test; the ones from earlier tests are removed, so events go to this one only. */
  async function endpoint(body: Record<string, unknown> = {}) {
    for (const id of endpoints.splice(0)) await b.call("DELETE", `/operator/webhook-endpoints/${id}`, { headers: op });
    const r = await b.call("POST", "/operator/webhook-endpoints", { headers: op, body: { url: hooks.url, ...body } });
    expect(r.status).toBe(201);
    endpoints.push(r.body.id);
    return r.body as { id: string; secret: string; events: string[] | null };
  }
  const deliveriesOf = async (id: string) => (await b.call("GET", `/operator/webhook-endpoints/${id}/deliveries?limit=100`, { headers: op })).body.data as any[];
  /** a dispatcher of the test's own (the app's worker does not run in tests), with a short timeout */
  const dispatcher = (timeoutMs = 2_000) => new WebhookDispatcher(b.db, b.clock, silentLogger(), { allowPrivate: true, timeoutMs });
  const since = (count: number) => hooks.received.slice(count);
  /** the time a delivery was signed at (billing's injected clock, not this machine's) */
  const signedAt = (r: Received) => Number(/t=(\d+)/.exec(r.signature)![1]);

  describe("endpoints", () => {
    it("registers an endpoint and shows its whsec_ secret once; the list never shows it; delete removes it, once", async () => {
      const created = await b.call("POST", "/operator/webhook-endpoints", { headers: op, body: { url: "https://hooks.example.com/core", events: ["invoice.paid"], description: "ledger" } });
      expect(created.status).toBe(201);
      expect(created.body).toEqual({
        id: expect.stringMatching(/^we_/),
        url: "https://hooks.example.com/core",
        events: ["invoice.paid"],
        description: "ledger",
        secret: expect.stringMatching(/^whsec_[\w-]{43}$/),
        createdAt: expect.any(Number),
        previousSecretExpiresAt: null,
      });
      const list = await b.call("GET", "/operator/webhook-endpoints", { headers: op });
      expect(list.body.data).toContainEqual({ id: created.body.id, url: "https://hooks.example.com/core", events: ["invoice.paid"], description: "ledger", createdAt: created.body.createdAt, previousSecretExpiresAt: null });
      expect(JSON.stringify(list.body)).not.toContain(created.body.secret);
      expect((await b.call("DELETE", `/operator/webhook-endpoints/${created.body.id}`, { headers: op })).body).toEqual({ id: created.body.id, deleted: true });
      expect((await b.call("DELETE", `/operator/webhook-endpoints/${created.body.id}`, { headers: op })).status).toBe(404);
      expect((await b.call("GET", "/operator/webhook-endpoints", { headers: op })).body.data.map((e: { id: string }) => e.id)).not.toContain(created.body.id);
    });

    it("refuses what is not an http(s) URL, unknown or repeated event types, unknown fields; tenants are 403", async () => {
      for (const body of [
        { url: "ftp://hooks.example.com" },
        { url: "not a url" },
        { url: "https://hooks.example.com", events: ["invoice.exploded"] },
        { url: "https://hooks.example.com", events: ["invoice.paid", "invoice.paid"] },
        { url: "https://hooks.example.com", events: [] },
        { url: "https://hooks.example.com", secret: "mine" },
        { url: `https://hooks.example.com/${"x".repeat(2048)}` },
      ]) {
        const r = await b.call("POST", "/operator/webhook-endpoints", { headers: op, body });
        expect(r.status, JSON.stringify(body).slice(0, 80)).toBe(400);
        expect(r.body.error.code).toBe("VALIDATION_ERROR");
      }
      const platformId = await b.newPlatform();
      expect((await b.call("POST", "/operator/webhook-endpoints", { headers: b.as.owner(platformId), body: { url: "https://hooks.example.com" } })).status).toBe(403);
      expect((await b.call("GET", "/operator/webhook-endpoints", { headers: b.as.owner(platformId) })).status).toBe(403);
    });

    it("refuses loopback and private addresses unless CORE_BILLING_WEBHOOK_ALLOW_PRIVATE allows them", async () => {
      const strict = await startBilling(database, { webhookAllowPrivate: false });
      try {
        const sop = strict.as.operator();
        for (const url of ["http://127.0.0.1:4900/hooks", "http://localhost/hooks", "http://10.1.2.3/", "http://[::1]:8080/", "http://169.254.169.254/latest/meta-data"]) {
          const r = await strict.call("POST", "/operator/webhook-endpoints", { headers: sop, body: { url } });
          expect(r.status, url).toBe(400);
          expect(r.body.error.message).toContain("CORE_BILLING_WEBHOOK_ALLOW_PRIVATE");
        }
        expect((await strict.call("POST", "/operator/webhook-endpoints", { headers: sop, body: { url: "https://hooks.example.com/" } })).status).toBe(201);
      } finally {
        await strict.close();
      }
    });
  });

  describe("events", () => {
    it("an upgrade writes subscription.created, invoice.finalized and invoice.paid, each carrying the object as the API answers it", async () => {
      const ep = await endpoint();
      const count = hooks.received.length;
      const { platformId, invoice } = await b.upgraded("plan_starter");
      await dispatcher().pass();
      const got = since(count);
      expect(got.map((r) => r.type).sort()).toEqual(["invoice.finalized", "invoice.paid", "subscription.created"]);
      const byType = Object.fromEntries(got.map((r) => [r.type, JSON.parse(r.body)]));
      const subscription = (await b.call("GET", `/subscription?platformId=${platformId}`, { headers: op })).body;
      expect(byType["subscription.created"].data).toEqual(subscription);
      const paidInvoice = (await b.call("GET", `/invoices/${invoice.id}?platformId=${platformId}`, { headers: op })).body;
      expect(byType["invoice.paid"].data).toEqual(paidInvoice);
      for (const event of Object.values(byType)) {
        expect(event).toEqual({ id: expect.stringMatching(/^evt_[0-9a-f]{32}$/), type: expect.any(String), createdAt: expect.any(Number), data: expect.any(Object) });
      }
      // every delivery is signed with the endpoint's secret, and verifies the documented way
      for (const r of got) expect(verifyCoreSignature(ep.secret, r.signature, r.body, signedAt(r))).toBeNull();
      expect(got.every((r) => signedAt(r) === Math.floor(b.clock.now().getTime() / 1000))).toBe(true);
    });

    it("an endpoint gets only the types it asked for; a declined upgrade is invoice.payment_failed and invoice.voided", async () => {
      await endpoint({ events: ["invoice.payment_failed", "invoice.voided"] });
      const count = hooks.received.length;
      const platformId = await b.newPlatform();
      const r = await b.call("POST", "/api/billing/upgrade", {
        headers: b.as.owner(platformId),
        body: { planId: "plan_starter", paymentMethodId: "pm_card_chargeCustomerFail", billingEmail: "b@example.com", idempotencyKey: crypto.randomUUID() },
      });
      expect(r.status).toBe(402);
      await b.upgraded("plan_growth");
      await dispatcher().pass();
      expect(since(count).map((e) => e.type).sort()).toEqual(["invoice.payment_failed", "invoice.voided"]);
    });

    it("tier changes and cancellations are subscription.updated and subscription.canceled; a trial ending in three days is subscription.trial_will_end, once", async () => {
      await endpoint({ events: ["subscription.updated", "subscription.canceled", "subscription.trial_will_end"] });
      const count = hooks.received.length;
      const { platformId, owner, subscription } = await b.upgraded("plan_starter");
      expect((await b.call("POST", "/subscription/change-tier", { headers: owner, body: { tier: "growth" } })).status).toBe(200);
      expect((await b.call("POST", `/operator/subscriptions/${subscription.id}/trial`, { headers: op, body: { trialDays: 10 } })).status).toBe(200);
      await dispatcher().pass();
      const types = () => since(count).map((e) => e.type);
      expect(types().filter((t) => t === "subscription.updated").length).toBeGreaterThanOrEqual(2);
      expect(types()).not.toContain("subscription.trial_will_end");
      await b.call("POST", "/operator/test-clock/advance", { headers: op, body: { seconds: 8 * 86_400 } });
      await b.ctx.worker.pass();
      await b.ctx.worker.pass();
      await dispatcher().pass();
      expect(types().filter((t) => t === "subscription.trial_will_end")).toHaveLength(1);
      const willEnd = JSON.parse(since(count).find((e) => e.type === "subscription.trial_will_end")!.body);
      expect(willEnd.data).toMatchObject({ id: subscription.id, platformId, status: "trialing" });
      const cancel = await b.call("POST", "/subscription/cancel", { headers: owner, body: {} });
      expect(cancel.status).toBe(200);
      await b.call("POST", "/operator/test-clock/advance", { headers: op, body: { seconds: 3 * 86_400 } });
      await dispatcher().pass();
      const canceled = since(count).filter((e) => e.type === "subscription.canceled").map((e) => JSON.parse(e.body).data);
      expect(canceled).toEqual([expect.objectContaining({ id: subscription.id, status: "canceled" })]);
    });

    it("usage crossing 80 % and 100 % of what the plan includes is usage.threshold_reached, each once, with exact quantities", async () => {
      await endpoint({ events: ["usage.threshold_reached"] });
      const count = hooks.received.length;
      const platformId = await b.newPlatform();
      await b.call("GET", `/subscription?platformId=${platformId}`, { headers: op });
      const free = (await b.call("GET", "/plans")).body.find((p: { tier: string }) => p.tier === "free");
      const included = Number(free.included.api_requests);
      const at = Math.floor((await b.call("GET", "/operator/test-clock", { headers: op })).body.now) - 60;
      const send = (id: string, quantity: number) => b.call("POST", "/usage/events", { headers: op, body: { events: [{ id, platformId, meter: "api_requests", quantity, timestamp: at }] } });
      expect((await send(unique("u"), included * 0.9)).status).toBe(200);
      expect((await send(unique("u"), included * 0.2)).status).toBe(200);
      expect((await send(unique("u"), 1)).status).toBe(200);
      await dispatcher().pass();
      const data = since(count).map((e) => JSON.parse(e.body).data).sort((x, y) => x.thresholdPercent - y.thresholdPercent);
      expect(data).toEqual([
        expect.objectContaining({ platformId, meter: "api_requests", thresholdPercent: 80, quantity: String(included * 0.9), included: String(included) }),
        expect.objectContaining({ platformId, meter: "api_requests", thresholdPercent: 100, quantity: String(included * 1.1), included: String(included) }),
      ]);
    });

    it("with no endpoint, nothing is written", async () => {
      for (const id of endpoints.splice(0)) await b.call("DELETE", `/operator/webhook-endpoints/${id}`, { headers: op });
      const before = (await b.db.select().from(webhookDeliveries)).length;
      await b.upgraded("plan_starter");
      expect((await b.db.select().from(webhookDeliveries)).length).toBe(before);
    });
  });

  describe("deliveries", () => {
    it("a receiver that fails, then times out, then recovers gets the event; every attempt is in the history", async () => {
      const ep = await endpoint({ events: ["invoice.paid"] });
      let calls = 0;
      hooks.answer(() => (++calls === 1 ? 500 : calls === 2 ? "hang" : 200));
      const count = hooks.received.length;
      await b.upgraded("plan_starter");
      const d = dispatcher(1_000);
      await d.pass();
      expect(calls).toBe(1);
      // not due yet: nothing is sent before its time
      await d.pass();
      expect(calls).toBe(1);
      b.clock.advance(retryDelayMs(1) + 1000);
      await d.pass();
      expect(calls).toBe(2);
      b.clock.advance(retryDelayMs(2) + 1000);
      await d.pass();
      expect(calls).toBe(3);
      hooks.answer(() => 200);
      const [delivery] = await deliveriesOf(ep.id);
      expect(delivery).toMatchObject({ status: "delivered", eventType: "invoice.paid", nextAttemptAt: null, finishedAt: expect.any(Number) });
      expect(delivery.attempts.map((a: { attempt: number; status: number | null; response: string }) => [a.attempt, a.status, a.response])).toEqual([
        [1, 500, "not now"],
        [2, null, "no answer within 1000 ms"],
        [3, 200, "ok"],
      ]);
      // each attempt was signed afresh, when it was sent, and every one verifies
      const got = since(count);
      expect(new Set(got.map((r) => r.eventId)).size).toBe(1);
      expect(new Set(got.map((r) => r.signature)).size).toBe(3);
      for (const r of got) expect(verifyCoreSignature(ep.secret, r.signature, r.body, signedAt(r))).toBeNull();
    });

    it("the documented check refuses a replayed old signature, another secret and a changed body", async () => {
      const ep = await endpoint({ events: ["invoice.paid"] });
      const count = hooks.received.length;
      await b.upgraded("plan_starter");
      await dispatcher().pass();
      const [r] = since(count);
      const sentAt = Number(/t=(\d+)/.exec(r!.signature)![1]);
      expect(verifyCoreSignature(ep.secret, r!.signature, r!.body, sentAt + 300)).toBeNull();
      expect(verifyCoreSignature(ep.secret, r!.signature, r!.body, sentAt + 301)).toMatch(/a replay/);
      expect(verifyCoreSignature("whsec_another", r!.signature, r!.body, sentAt)).toMatch(/no signature matches/);
      expect(verifyCoreSignature(ep.secret, r!.signature, r!.body.replace("invoice.paid", "invoice.void"), sentAt)).toMatch(/no signature matches/);
      expect(verifyCoreSignature(ep.secret, undefined, r!.body, sentAt)).toBe("no Core-Signature header");
    });

    it("two dispatchers at once never send the same attempt: every event arrives once", async () => {
      const ep = await endpoint({ events: ["invoice.finalized"] });
      const count = hooks.received.length;
      for (let i = 0; i < 12; i++) await b.upgraded("plan_starter");
      const [one, two] = [dispatcher(), dispatcher()];
      await Promise.all([one.pass(), two.pass(), one.pass()]);
      const got = since(count);
      expect(got).toHaveLength(12);
      expect(new Set(got.map((r) => r.eventId)).size).toBe(12);
      const deliveries = await deliveriesOf(ep.id);
      expect(deliveries).toHaveLength(12);
      for (const d of deliveries) expect(d.attempts.map((a: { attempt: number; status: number }) => [a.attempt, a.status])).toEqual([[1, 200]]);
    });

    it("gives up three days after the first attempt, and the delivery says so", async () => {
      const ep = await endpoint({ events: ["invoice.paid"] });
      hooks.answer(() => 503);
      await b.upgraded("plan_starter");
      const d = dispatcher();
      const started = b.clock.now().getTime();
      for (let i = 0; i < 40 && b.clock.now().getTime() - started <= RETRY_FOR_MS + retryDelayMs(99); i++) {
        await d.pass();
        b.clock.advance(retryDelayMs(99));
      }
      hooks.answer(() => 200);
      const [delivery] = await deliveriesOf(ep.id);
      expect(delivery.status).toBe("failed");
      expect(delivery.attempts.length).toBeGreaterThan(10);
      expect(delivery.attempts.every((a: { status: number }) => a.status === 503)).toBe(true);
      const span = delivery.attempts.at(-1).at - delivery.attempts[0].at;
      expect(span).toBeLessThanOrEqual(RETRY_FOR_MS / 1000);
    });

    it("an endpoint deleted with deliveries pending gets nothing more; its pending deliveries end as failed", async () => {
      const ep = await endpoint({ events: ["invoice.paid"] });
      const count = hooks.received.length;
      await b.upgraded("plan_starter");
      expect((await b.call("DELETE", `/operator/webhook-endpoints/${ep.id}`, { headers: op })).status).toBe(200);
      endpoints.splice(0);
      await dispatcher().pass();
      expect(since(count)).toEqual([]);
      const [delivery] = await deliveriesOf(ep.id);
      expect(delivery).toMatchObject({ status: "failed", attempts: [] });
    });

    /** An endpoint at `http://<a new name>:<the receiver's port>/hooks`; the name means what the dispatcher's resolver says. */
    async function namedEndpoint() {
      for (const id of endpoints.splice(0)) await b.call("DELETE", `/operator/webhook-endpoints/${id}`, { headers: op });
      const host = `${unique("hooks")}.example.com`;
      const r = await b.call("POST", "/operator/webhook-endpoints", { headers: op, body: { url: `http://${host}:${new URL(hooks.url).port}/hooks`, events: ["invoice.paid"] } });
      expect(r.status).toBe(201);
      endpoints.push(r.body.id);
      return { id: r.body.id as string, host };
    }
    /** A resolver answering `answers` in turn (the last one again when they run out), counting the lookups per name. */
    function resolver(...answers: string[][]) {
      const lookups: string[] = [];
      return {
        lookups,
        resolve: async (hostname: string) => {
          lookups.push(hostname);
          return answers[Math.min(lookups.length, answers.length) - 1]!;
        },
      };
    }

    it("without CORE_BILLING_WEBHOOK_ALLOW_PRIVATE, a name that resolves to a private address is not sent to", async () => {
      const named = await namedEndpoint();
      const count = hooks.received.length;
      await b.upgraded("plan_starter");
      const { resolve } = resolver(["10.0.0.7"]);
      await new WebhookDispatcher(b.db, b.clock, silentLogger(), { allowPrivate: false, resolve }).pass();
      const [delivery] = await deliveriesOf(named.id);
      expect(delivery.attempts[0]).toMatchObject({ status: null, response: `not sent: ${named.host} resolves to 10.0.0.7, a loopback or private address (CORE_BILLING_WEBHOOK_ALLOW_PRIVATE)` });
      expect(delivery.status).toBe("pending");
      expect(since(count)).toEqual([]);
    });

    it("the address is checked when the connection is made: a name that answers loopback then is refused, and nothing reaches the receiver (DNS rebinding)", async () => {
      // the resolver decides where the connection goes: allowed, the same name reaches the receiver
      const open = await namedEndpoint();
      let count = hooks.received.length;
      await b.upgraded("plan_starter");
      await new WebhookDispatcher(b.db, b.clock, silentLogger(), { allowPrivate: true, resolve: resolver(["127.0.0.1"]).resolve }).pass();
      expect(since(count).map((r) => r.type)).toEqual(["invoice.paid"]);
      expect((await deliveriesOf(open.id))[0]).toMatchObject({ status: "delivered" });

      // a name that answers a public address first and loopback afterwards: one lookup per connection,
      // the one the socket uses, so the loopback answer is refused where it would have been connected to
      const named = await namedEndpoint();
      count = hooks.received.length;
      await b.upgraded("plan_starter");
      const rebinding = resolver(["198.51.100.7"], ["127.0.0.1"]);
      const guarded = new WebhookDispatcher(b.db, b.clock, silentLogger(), { allowPrivate: false, resolve: rebinding.resolve, timeoutMs: 1_500 });
      await guarded.pass();
      expect(rebinding.lookups).toEqual([named.host]);
      b.clock.advance(retryDelayMs(1) + 1000);
      await guarded.pass();
      expect(rebinding.lookups).toEqual([named.host, named.host]);
      const [delivery] = await deliveriesOf(named.id);
      expect(delivery.status).toBe("pending");
      expect(delivery.attempts).toHaveLength(2);
      const [first, second] = [...delivery.attempts].sort((x: { attempt: number }, y: { attempt: number }) => x.attempt - y.attempt);
      // the public answer was tried (it leads nowhere from here: unreachable, or no answer in time)
      expect(first).toMatchObject({ status: null, response: expect.not.stringContaining("private") });
      expect(second).toMatchObject({ status: null, response: `not sent: ${named.host} resolves to 127.0.0.1, a loopback or private address (CORE_BILLING_WEBHOOK_ALLOW_PRIVATE)` });
      expect(since(count)).toEqual([]);
    });

    it("loopback in any form is refused: written in the URL, IPv4-mapped, or one answer among public ones", async () => {
      const literal = await endpoint({ events: ["invoice.paid"] });
      let count = hooks.received.length;
      await b.upgraded("plan_starter");
      await new WebhookDispatcher(b.db, b.clock, silentLogger(), { allowPrivate: false }).pass();
      expect((await deliveriesOf(literal.id))[0].attempts[0]).toMatchObject({ status: null, response: "not sent: 127.0.0.1 is a loopback or private address (CORE_BILLING_WEBHOOK_ALLOW_PRIVATE)" });
      for (const answer of [["::ffff:127.0.0.1"], ["::ffff:7f00:1"], ["203.0.113.9", "127.0.0.1"]]) {
        const named = await namedEndpoint();
        count = hooks.received.length;
        await b.upgraded("plan_starter");
        await new WebhookDispatcher(b.db, b.clock, silentLogger(), { allowPrivate: false, resolve: resolver(answer).resolve }).pass();
        const [delivery] = await deliveriesOf(named.id);
        expect(delivery.attempts[0], answer.join()).toMatchObject({ status: null, response: expect.stringContaining("a loopback or private address (CORE_BILLING_WEBHOOK_ALLOW_PRIVATE)") });
        expect(since(count)).toEqual([]);
      }
    });

    it("a redirect is the endpoint's answer and is not followed", async () => {
      let reached = 0;
      const inside = createServer((_req, res) => {
        reached += 1;
        res.end("ok");
      });
      const redirecting = createServer((_req, res) => res.writeHead(307, { location: `http://127.0.0.1:${(inside.address() as AddressInfo).port}/inside` }).end());
      await Promise.all([inside, redirecting].map((server) => new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))));
      try {
        for (const id of endpoints.splice(0)) await b.call("DELETE", `/operator/webhook-endpoints/${id}`, { headers: op });
        const r = await b.call("POST", "/operator/webhook-endpoints", { headers: op, body: { url: `http://127.0.0.1:${(redirecting.address() as AddressInfo).port}/hooks`, events: ["invoice.paid"] } });
        endpoints.push(r.body.id);
        await b.upgraded("plan_starter");
        await dispatcher().pass();
        const [delivery] = await deliveriesOf(r.body.id);
        expect(delivery).toMatchObject({ status: "pending", attempts: [expect.objectContaining({ status: 307 })] });
        expect(reached).toBe(0);
      } finally {
        for (const server of [inside, redirecting]) {
          server.closeAllConnections();
          await new Promise((resolve) => server.close(resolve));
        }
      }
    });

  });

  describe("secret rotation", () => {
    const rotate = (id: string, body?: unknown, headers = op) => b.call("POST", `/operator/webhook-endpoints/${id}/rotate-secret`, { headers, ...(body !== undefined && { body }) });
    const nowSeconds = () => Math.floor(b.clock.now().getTime() / 1000);
    /** one invoice.paid delivered to the endpoint now; answers what the receiver got */
    async function deliveredNow() {
      const count = hooks.received.length;
      await b.upgraded("plan_starter");
      await dispatcher().pass();
      const got = since(count);
      expect(got).toHaveLength(1);
      return got[0]!;
    }

    it("a new secret, shown once; while the old one is active each delivery carries both v1 signatures and a receiver with either accepts; at its expiry only the new one", async () => {
      const ep = await endpoint({ events: ["invoice.paid"] });
      const rotated = await rotate(ep.id, {});
      expect(rotated.status).toBe(200);
      const at = nowSeconds();
      expect(rotated.body).toEqual({ id: ep.id, url: hooks.url, events: ["invoice.paid"], description: null, createdAt: expect.any(Number), secret: expect.stringMatching(/^whsec_[\w-]{43}$/), previousSecretExpiresAt: at + 86_400 });
      const fresh = rotated.body.secret as string;
      expect(fresh).not.toBe(ep.secret);
      // the list shows when the old secret stops, never a secret
      const list = await b.call("GET", "/operator/webhook-endpoints", { headers: op });
      expect(list.body.data).toContainEqual(expect.objectContaining({ id: ep.id, previousSecretExpiresAt: at + 86_400 }));
      expect(JSON.stringify(list.body)).not.toContain(fresh);
      expect(JSON.stringify(list.body)).not.toContain(ep.secret);

      const during = await deliveredNow();
      const sig = parsedSignature(during.signature);
      expect(sig.v1).toHaveLength(2);
      expect(sig.t).toBe(nowSeconds());
      // the new secret's signature comes first
      expect(verifyCoreSignature(fresh, `t=${sig.t},v1=${sig.v1[0]}`, during.body, sig.t)).toBeNull();
      expect(verifyCoreSignature(ep.secret, `t=${sig.t},v1=${sig.v1[1]}`, during.body, sig.t)).toBeNull();
      for (const secret of [fresh, ep.secret]) {
        expect(stripeAccepts(secret, during)).toBe(true);
        expect(verifyCoreSignature(secret, during.signature, during.body, sig.t)).toBeNull();
      }
      expect(stripeAccepts("whsec_another", during)).toBe(false);

      // a second before the expiry both still sign; at it only the new one
      b.clock.advance(86_399_000);
      expect(parsedSignature((await deliveredNow()).signature).v1).toHaveLength(2);
      b.clock.advance(1_000);
      const after = await deliveredNow();
      expect(parsedSignature(after.signature).v1).toHaveLength(1);
      expect(stripeAccepts(fresh, after)).toBe(true);
      expect(stripeAccepts(ep.secret, after)).toBe(false);
      expect(verifyCoreSignature(ep.secret, after.signature, after.body, signedAt(after))).toMatch(/no signature matches/);
      // and the expired secret is not kept
      const [row] = await b.db.select().from(webhookEndpoints).where(eq(webhookEndpoints.id, ep.id));
      expect(row!.previousSecret).toBeNull();
      expect(row!.secret).toBe(fresh);
    });

    it("expiresInSeconds 0 retires the old secret now; the body may be left out (a day); 7 days at most", async () => {
      const ep = await endpoint({ events: ["invoice.paid"] });
      const now = await rotate(ep.id, { expiresInSeconds: 0 });
      expect(now.status).toBe(200);
      expect(now.body.previousSecretExpiresAt).toBe(nowSeconds());
      const r = await deliveredNow();
      expect(parsedSignature(r.signature).v1).toHaveLength(1);
      expect(stripeAccepts(now.body.secret, r)).toBe(true);
      expect(stripeAccepts(ep.secret, r)).toBe(false);

      const bare = await b.call("POST", `/operator/webhook-endpoints/${ep.id}/rotate-secret`, { headers: op });
      expect(bare.status, JSON.stringify(bare.body)).toBe(200);
      expect(bare.body.previousSecretExpiresAt).toBe(nowSeconds() + 86_400);
      const week = await rotate(ep.id, { expiresInSeconds: 604_800 });
      expect(week.status).toBe(200);
      expect(week.body.previousSecretExpiresAt).toBe(nowSeconds() + 604_800);
      for (const body of [{ expiresInSeconds: 604_801 }, { expiresInSeconds: -1 }, { expiresInSeconds: 1.5 }, { expiresInSeconds: "60" }, { expiresInSeconds: null }, { secret: "whsec_mine" }, []]) {
        const refused = await rotate(ep.id, body);
        expect(refused.status, JSON.stringify(body)).toBe(400);
        expect(refused.body.error.code).toBe("VALIDATION_ERROR");
      }
      // a refused rotation changed nothing: the week's secret still signs, with the one before it
      const last = await deliveredNow();
      expect(stripeAccepts(week.body.secret, last)).toBe(true);
      expect(stripeAccepts(bare.body.secret, last)).toBe(true);
    });

    it("rotating again while the previous secret is active replaces it with the current one: the oldest stops at once", async () => {
      const ep = await endpoint({ events: ["invoice.paid"] });
      const first = await rotate(ep.id, { expiresInSeconds: 3_600 });
      const second = await rotate(ep.id, { expiresInSeconds: 600 });
      expect(second.body.previousSecretExpiresAt).toBe(nowSeconds() + 600);
      const r = await deliveredNow();
      expect(parsedSignature(r.signature).v1).toHaveLength(2);
      expect(stripeAccepts(second.body.secret, r)).toBe(true);
      expect(stripeAccepts(first.body.secret, r)).toBe(true);
      expect(stripeAccepts(ep.secret, r)).toBe(false);
    });

    it("with an Idempotency-Key a retry answers the same secret and rotates once, also when sent at once; the key with another body is 422", async () => {
      const ep = await endpoint({ events: ["invoice.paid"] });
      const key = { ...op, "idempotency-key": unique("rotate") };
      const answers = await Promise.all(Array.from({ length: 4 }, () => rotate(ep.id, { expiresInSeconds: 3_600 }, key)));
      const done = answers.filter((a) => a.status === 200);
      expect(done.length).toBeGreaterThanOrEqual(1);
      for (const a of answers.filter((a) => a.status !== 200)) expect(a.body.error.code).toBe("IDEMPOTENCY_KEY_IN_USE");
      expect(new Set(done.map((a) => a.body.secret)).size).toBe(1);
      const again = await rotate(ep.id, { expiresInSeconds: 3_600 }, key);
      expect(again.status).toBe(200);
      expect(again.headers.get("idempotent-replayed")).toBe("true");
      expect(again.body.secret).toBe(done[0]!.body.secret);
      // rotated once: the original secret is still the previous one, and still signs
      const [row] = await b.db.select().from(webhookEndpoints).where(eq(webhookEndpoints.id, ep.id));
      expect(row!.secret).toBe(again.body.secret);
      expect(row!.previousSecret).toBe(ep.secret);
      expect(stripeAccepts(ep.secret, await deliveredNow())).toBe(true);
      const reused = await rotate(ep.id, { expiresInSeconds: 60 }, key);
      expect(reused.status).toBe(422);
      expect(reused.body.error.code).toBe("IDEMPOTENCY_KEY_REUSED");
    });

    it("a removed or unknown endpoint is 404; tenants get 403, nobody 401; each rotation is audited without a secret", async () => {
      const ep = await endpoint({ events: ["invoice.paid"] });
      const platformId = await b.newPlatform();
      expect((await rotate(ep.id, {}, b.as.owner(platformId))).status).toBe(403);
      expect((await rotate(ep.id, {}, {})).status).toBe(401);
      const rotated = await rotate(ep.id, { expiresInSeconds: 60 }, await b.as.service());
      expect(rotated.status).toBe(200);
      const audit = await b.db.select().from(operatorAudit).where(and(eq(operatorAudit.action, "webhook_endpoint.rotate_secret"), eq(operatorAudit.targetId, ep.id)));
      expect(audit).toHaveLength(1);
      expect(audit[0]).toMatchObject({ actorType: "service", after: expect.objectContaining({ previousSecretExpiresAt: nowSeconds() + 60 }) });
      const everything = JSON.stringify(await b.db.select().from(operatorAudit));
      expect(everything).not.toContain(rotated.body.secret);
      expect(everything).not.toContain(ep.secret);
      expect(everything).not.toContain("whsec_");

      expect((await b.call("DELETE", `/operator/webhook-endpoints/${ep.id}`, { headers: op })).status).toBe(200);
      const gone = await rotate(ep.id, {});
      expect(gone.status).toBe(404);
      expect(gone.body.error).toEqual(expect.objectContaining({ code: "NOT_FOUND", requestId: expect.any(String) }));
      expect((await rotate("we_nobody", {})).status).toBe(404);
    });
  });
});
