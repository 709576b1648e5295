import { fileURLToPath } from "node:url";
import { and, eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newId } from "@core/kit";
import { testDatabases } from "@core/storage";
import { idempotencyKeys, invoices } from "../src/db/schema.js";
import { requestHashOf } from "../src/idempotency.js";
import { LEASE_MS } from "../src/leases.js";
import { startBillingChild } from "./support/child.js";
import { startBilling, type Billing, type Headers } from "./support/billing.js";
import { localPayments } from "./support/faults.js";

/** The user every test owner is (the fake IAM's principal): idempotency keys are the caller's. */
const callerOf = (b: Billing, headers: Headers) => `user:${b.iam.sessions.get(headers.authorization!.slice("Bearer ".length))!.userId}`;

/** Polls `check` until it holds (real time, bounded): for what another part of the process does on its own time. */
async function eventually(check: () => Promise<boolean>, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/**
 * An idempotency key's lease is short and renewed while its request runs (DESIGN §6.6,
 * docs/vault/cross-cutting/security.md, Billing). A key left behind by a process that died frees
 * itself within 15 s of its last renewal, and the retry then finishes the request, charging once; a
 * request that is alive keeps its key however long the provider takes. Over real HTTP; time is the
 * injected clock, and the live request's lease is made short through billing's deps.
 */
describe.each(testDatabases())("idempotency leases on $name", (database) => {
  describe("a key left behind by a process that is gone", () => {
    let b: Billing;
    let http: Awaited<ReturnType<Billing["overHttp"]>>;
    beforeAll(async () => {
      b = await startBilling(database);
      http = await b.overHttp();
    });
    afterAll(() => b?.close());

    it("answers 409 IDEMPOTENCY_KEY_IN_USE with Retry-After until 15 s have passed, then the retry succeeds and charges once", async () => {
      expect(LEASE_MS).toBeLessThanOrEqual(15_000);
      const { platformId, owner } = await b.upgraded();
      const key = crypto.randomUUID();
      const body = { tier: "growth" };
      // what a claim writes, by a process that died just after it (its lease never renewed)
      const claimedAt = b.clock.now();
      await b.db.insert(idempotencyKeys).values({
        caller: callerOf(b, owner),
        route: "/subscription/change-tier",
        key,
        requestHash: requestHashOf({ ...body, platformId }),
        state: "in_progress",
        lockedUntil: new Date(claimedAt.getTime() + LEASE_MS),
        requestKey: newId("req"),
        createdAt: claimedAt,
        expiresAt: new Date(claimedAt.getTime() + 86_400_000),
      });
      const retry = () => http.call("POST", "/subscription/change-tier", { headers: { ...owner, "idempotency-key": key }, body });

      const busy = await retry();
      expect(busy.status).toBe(409);
      expect(busy.body.error).toMatchObject({ code: "IDEMPOTENCY_KEY_IN_USE", details: null });
      expect(Number(busy.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
      expect(Number(busy.headers.get("retry-after"))).toBeLessThanOrEqual(15);
      b.clock.advance(LEASE_MS - 1_000);
      expect((await retry()).status).toBe(409);

      b.clock.advance(1_000);
      const done = await retry();
      expect(done.status, JSON.stringify(done.body)).toBe(200);
      expect(done.body.subscription.tier).toBe("growth");
      const again = await retry();
      expect(again.status).toBe(200);
      expect(again.headers.get("idempotent-replayed")).toBe("true");
      const changes = (await b.db.select().from(invoices).where(eq(invoices.platformId, platformId))).filter((i) => i.reason === "subscription_update");
      expect(changes).toHaveLength(1);
      expect((await localPayments(b)).get(changes[0]!.id)).toHaveLength(1);
    });
  });

  describe("a live request whose provider is slow", () => {
    /** the lease, made short for the test through billing's deps (what LEASE_MS is in production) */
    const LEASE = 300;
    let b: Billing;
    let http: Awaited<ReturnType<Billing["overHttp"]>>;
    let holdCharges: Promise<void> | null = null;
    let charging: () => void = () => {};
    beforeAll(async () => {
      b = await startBilling(database, {}, {
        leaseMs: LEASE,
        localFaults: {
          beforeCharge: async () => {
            if (!holdCharges) return;
            charging();
            await holdCharges;
          },
        },
      });
      http = await b.overHttp();
    });
    afterAll(() => b?.close());

    it("keeps its key, and its payment attempt, across many lease lengths; its retry answers what it came to, charging once", async () => {
      const { platformId, owner } = await b.upgraded();
      let release!: () => void;
      holdCharges = new Promise<void>((resolve) => (release = resolve));
      const reached = new Promise<void>((resolve) => (charging = resolve));
      const key = crypto.randomUUID();
      const send = () => http.call("POST", "/subscription/change-tier", { headers: { ...owner, "idempotency-key": key }, body: { tier: "scale" } });
      const first = send();
      try {
        await reached;
        const where = and(eq(idempotencyKeys.caller, callerOf(b, owner)), eq(idempotencyKeys.key, key));
        const [change] = (await b.db.select().from(invoices).where(eq(invoices.platformId, platformId))).filter((i) => i.reason === "subscription_update");
        for (let lease = 0; lease < 5; lease++) {
          // time moves two leases on; the request is still waiting for the provider, and its heartbeat renews both claims
          b.clock.advance(2 * LEASE);
          await eventually(async () => {
            const [row] = await b.db.select().from(idempotencyKeys).where(where);
            const [invoice] = await b.db.select().from(invoices).where(eq(invoices.id, change!.id));
            return row!.lockedUntil > b.clock.now() && invoice!.nextCheckAt! > b.clock.now();
          }, "the heartbeat's renewals");
          const retry = await send();
          expect(retry.status, JSON.stringify(retry.body)).toBe(409);
          expect(retry.body.error.code).toBe("IDEMPOTENCY_KEY_IN_USE");
          // another replica's worker does not take the attempt over either: it is not due
          await b.replica().app.ctx.worker.pass();
          const [invoice] = await b.db.select().from(invoices).where(eq(invoices.id, change!.id));
          expect(invoice).toMatchObject({ status: "open", collectionState: "charging", checkCount: 0 });
        }
      } finally {
        holdCharges = null;
        release();
      }
      const answered = await first;
      expect(answered.status, JSON.stringify(answered.body)).toBe(200);
      expect(answered.body.subscription.tier).toBe("scale");
      const replayed = await send();
      expect(replayed.status).toBe(200);
      expect(replayed.headers.get("idempotent-replayed")).toBe("true");
      expect((await localPayments(b)).get(answered.body.invoice.id)).toHaveLength(1);
    });
  });
});

const postgres = testDatabases().find((d) => d.name === "postgres");

/**
 * The same, with a real crash: billing in a child process is killed with SIGKILL while an upgrade
 * waits for its charge. The retry of the same request, with the same key, to a billing that is alive
 * answers 409 while the dead one's lease runs (ending within 15 s of the kill), then asks the
 * provider about the attempt the dead one left (it had sent nothing), charges it under the same
 * provider key and answers the upgrade, paid once: it does not wait out a minute-long claim.
 */
describe.skipIf(!postgres)("an idempotency key held by a process killed mid-charge (postgres)", () => {
  let b: Billing;
  beforeAll(async () => {
    b = await startBilling(postgres!);
  });
  afterAll(() => b?.close());

  it("is free within 15 s of the kill, and the retry answers the paid upgrade with one charge", async () => {
    const child = await startBillingChild(b, fileURLToPath(new URL("./support/idempotency-child.ts", import.meta.url)));
    const exited = new Promise((resolve) => child.process.on("exit", resolve));
    const platformId = await b.newPlatform();
    const owner = b.as.owner(platformId);
    const body = { planId: "plan_starter", paymentMethodId: "pm_card_visa", billingEmail: "crash@example.com", idempotencyKey: crypto.randomUUID() };
    const sent = fetch(`${child.url}/api/billing/upgrade`, { method: "POST", headers: { ...owner, "content-type": "application/json" }, body: JSON.stringify(body) }).catch(() => null);
    let killedAt = 0;
    try {
      // the child has begun the charge (its provider never answers): the kill lands mid-charge
      await eventually(async () => (await b.db.select().from(invoices).where(eq(invoices.platformId, platformId))).some((i) => i.collectionState === "charging"), "the child's charge");
    } finally {
      child.process.kill("SIGKILL");
      killedAt = Date.now();
      await exited;
    }
    expect(await sent).toBeNull();
    const [left] = await b.db.select().from(idempotencyKeys).where(and(eq(idempotencyKeys.caller, callerOf(b, owner)), eq(idempotencyKeys.key, body.idempotencyKey)));
    expect(left!.state).toBe("in_progress");
    expect(left!.lockedUntil.getTime() - killedAt).toBeLessThanOrEqual(LEASE_MS);

    const http = await b.overHttp();
    const retry = () => http.call("POST", "/api/billing/upgrade", { headers: owner, body });
    b.clock.set(new Date(left!.lockedUntil.getTime() - 1_000));
    const busy = await retry();
    expect(busy.status).toBe(409);
    expect(busy.body.error.code).toBe("IDEMPOTENCY_KEY_IN_USE");
    b.clock.set(left!.lockedUntil);
    const done = await retry();
    expect(done.status, JSON.stringify(done.body)).toBe(200);
    expect(done.body).toMatchObject({ subscription: { tier: "starter", status: "active" }, invoice: { status: "paid" } });
    expect((await localPayments(b)).get(done.body.invoice.id)).toHaveLength(1);
    const replayed = await retry();
    expect(replayed.status).toBe(200);
    expect(replayed.headers.get("idempotent-replayed")).toBe("true");
  }, 60_000);
});
