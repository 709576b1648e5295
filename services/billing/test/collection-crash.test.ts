import { randomInt, randomUUID } from "node:crypto";
import { fileURLToPath } from "node:url";
import { and, asc, eq, isNotNull } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabases } from "@core/storage";
import { invoices } from "../src/db/schema.js";
import { startBillingChild } from "./support/child.js";
import { startBilling, type Billing, type Headers } from "./support/billing.js";
import { expectMoneyConsistent, localPayments } from "./support/faults.js";

/**
 * Crash safety of collection (DESIGN §6.9), on PostgreSQL: billing runs in a child process that is
 * killed with SIGKILL at random moments while upgrades, tier changes and a month's renewals are being
 * collected (its provider takes a little time before and after each charge, so a kill lands
 * anywhere: before the invoice, between the invoice and the charge, between the charge and its
 * settling). A new child takes over each time. In the end a billing restarted on the same database
 * runs its worker's passes, every request is retried with its key, and then: one charge per paid
 * invoice, no charge without a paid invoice, each subscription holds what was paid for, and
 * `payments/reconcile` agrees.
 */

const child = fileURLToPath(new URL("./support/collection-child.ts", import.meta.url));
const postgres = testDatabases().find((d) => d.name === "postgres");
const ROUNDS = 5;
const PLATFORMS_PER_ROUND = 4;

interface Sent {
  method: string;
  path: string;
  headers: Headers;
  body: unknown;
  platformId: string;
}

describe.skipIf(!postgres)("collection killed with SIGKILL (postgres)", () => {
  let b: Billing;
  beforeAll(async () => {
    b = await startBilling(postgres!, { testClock: true });
  });
  afterAll(() => b?.close());

  const startChild = () => startBillingChild(b, child);

  it("one charge per paid invoice and the paid intents, however the process dies mid-collection", async () => {
    const op = b.as.operator();
    const sent: Sent[] = [];
    let answered = 0;
    let unanswered = 0;
    for (let round = 0; round < ROUNDS; round++) {
      const running = await startChild();
      const exited = new Promise((resolve) => running.process.on("exit", resolve));
      // the kill comes once a chosen request of the round is on its way (then up to 30 ms later, or at
      // once in the first round), so it lands mid-collection however fast the machine answers; a
      // timer alone missed every request of every round on a quiet machine
      const killAt = randomInt(1, 2 * PLATFORMS_PER_ROUND + 1);
      let sentThisRound = 0;
      let killer: NodeJS.Timeout | undefined;
      const send = async (request: Sent) => {
        sent.push(request);
        try {
          const answer = fetch(`${running.url}${request.path}`, { method: request.method, headers: { ...request.headers, "content-type": "application/json" }, body: JSON.stringify(request.body) });
          if (++sentThisRound === killAt) killer = setTimeout(() => running.process.kill("SIGKILL"), round === 0 ? 0 : randomInt(0, 30));
          const res = await answer;
          await res.text();
          // whatever it answers, never a failure of its own: its result, a refusal, or "not known yet"
          expect(res.status).not.toBe(500);
          answered++;
        } catch {
          unanswered++;
        }
      };
      const platforms = await Promise.all(Array.from({ length: PLATFORMS_PER_ROUND }, () => b.newPlatform()));
      await Promise.all([
        ...platforms.map(async (platformId) => {
          const owner = b.as.owner(platformId);
          await send({ method: "POST", path: "/api/billing/upgrade", headers: owner, body: { planId: "plan_starter", paymentMethodId: "pm_card_visa", billingEmail: "crash@example.com", idempotencyKey: randomUUID() }, platformId });
          await send({ method: "POST", path: "/subscription/change-tier", headers: { ...owner, "idempotency-key": randomUUID() }, body: { tier: "growth" }, platformId });
        }),
        // a month passes: every platform so far is renewed, and charged, while the kill may come
        (async () => {
          await new Promise((resolve) => setTimeout(resolve, randomInt(0, 300)));
          await fetch(`${running.url}/operator/test-clock/advance`, { method: "POST", headers: { ...op, "content-type": "application/json" }, body: JSON.stringify({ seconds: 32 * 86_400 }) }).catch(() => undefined);
        })(),
      ]);
      clearTimeout(killer);
      running.process.kill("SIGKILL");
      await exited;
    }

    // billing again, on the same database: its worker's passes settle what the dead ones left
    const leftInFlight = (await b.db.select({ id: invoices.id }).from(invoices).where(isNotNull(invoices.collectionState))).length;
    b.clock.set(new Date(Date.now() + 2 * 3_600_000));
    for (let pass = 0; pass < 6; pass++) {
      await b.ctx.worker.pass();
      const inFlight = await b.db.select({ id: invoices.id }).from(invoices).where(isNotNull(invoices.collectionState));
      if (inFlight.length === 0) break;
      b.clock.advance(61 * 60_000);
    }
    // every request again, with its key: it answers what became of it, and is never still pending
    for (const request of sent) {
      const again = await b.call(request.method, request.path, { headers: request.headers, body: request.body });
      expect(again.status, `${request.path}: ${JSON.stringify(again.body)}`).toBeLessThan(500);
    }
    await expectMoneyConsistent({ b, paymentsByInvoice: () => localPayments(b) });
    for (const platformId of new Set(sent.map((s) => s.platformId))) {
      const paid = await b.db
        .select()
        .from(invoices)
        .where(and(eq(invoices.platformId, platformId), eq(invoices.status, "paid"), isNotNull(invoices.intent)))
        .orderBy(asc(invoices.finalizedAt), asc(invoices.seq));
      let tier = "free";
      for (const invoice of paid) if (invoice.intent!.kind === "upgrade" || invoice.intent!.kind === "change_tier") tier = invoice.intent!.tier;
      expect((await b.call("GET", `/subscription?platformId=${platformId}`, { headers: op })).body.tier, platformId).toBe(tier);
    }
    const charges = [...(await localPayments(b)).values()].flat().length;
    console.log(`collection crash test: ${ROUNDS} kills, ${answered} answered and ${unanswered} unanswered requests, ${leftInFlight} payments left in flight by the dead, ${charges} charges, each of one paid invoice`);
    expect(unanswered).toBeGreaterThan(0);
  }, 240_000);
});
