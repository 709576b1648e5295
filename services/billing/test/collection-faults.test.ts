import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabases } from "@core/storage";
import { customers } from "../src/db/schema.js";
import { moveBalance } from "../src/invoicing.js";
import { startBilling, type Answer, type Billing, type Headers } from "./support/billing.js";
import { expectMoneyConsistent, key, PROVIDER_FAULTS, startFaultyBilling, type FaultyBilling, type ProviderFault } from "./support/faults.js";

/**
 * Every money path against a provider that fails the way providers fail (DESIGN §6.9): for each
 * path and each fault, the step answers what it knows (its result, or 503 PAYMENT_PENDING, never a
 * 500 or a charge twice), the worker's checks settle what was unknown, the client's retry with the
 * same key answers the final outcome, and then: exactly one charge per paid invoice, no charge
 * without a paid invoice, and the subscription holds exactly what was paid for.
 */

/** One way money moves: how to get a platform to it, the step itself, its retry, and what holds once paid. */
interface MoneyPath {
  name: string;
  /** the providers it exists with (default both) */
  providers?: ("local" | "stripe")[];
  prepare(b: Billing): Promise<Scene>;
  /** the step: a request (answered) or a worker pass (null) */
  act(b: Billing, scene: Scene): Promise<Answer | null>;
  /** the state once the step's payment succeeded */
  paid(b: Billing, scene: Scene): Promise<void>;
  /** the state once the step's card was refused (the decline case) */
  declined(b: Billing, scene: Scene, answer: Answer | null): Promise<void>;
}

interface Scene {
  platformId: string;
  owner: Headers;
  op: Headers;
  subscription: any;
  idempotencyKey: string;
  /** a card that declines every charge was made the default */
  declining?: boolean;
  /** the invoice a payment by hand pays */
  invoiceId?: string;
}

const subscriptionOf = async (b: Billing, scene: Scene) => (await b.call("GET", `/subscription?platformId=${scene.platformId}`, { headers: scene.op })).body;
const invoicesOf = async (b: Billing, scene: Scene) => (await b.call("GET", `/invoices?platformId=${scene.platformId}&limit=100`, { headers: scene.op })).body.data as any[];
const toPeriodEnd = async (b: Billing, scene: Scene) => {
  b.clock.set(new Date(((await subscriptionOf(b, scene)).currentPeriodEnd + 60) * 1000));
  await b.ctx.worker.pass();
};
/** A customer's default card that refuses every charge (Stripe's pm_card_chargeCustomerFail), made default in the records only. */
async function declineNext(b: Billing, scene: Scene) {
  const customerId = scene.subscription.customerId;
  const card = await b.call("POST", "/payment-methods/pm_card_chargeCustomerFail/attach", { headers: scene.op, body: { customerId } });
  await b.db.update(customers).set({ defaultPaymentMethodId: card.body.id }).where(eq(customers.id, customerId));
}
async function upgradedScene(b: Billing, plan = "plan_starter"): Promise<Scene> {
  const up = await b.upgraded(plan);
  return { platformId: up.platformId, owner: up.owner, op: b.as.operator(), subscription: up.subscription, idempotencyKey: key() };
}

/** A renewal refused, then the good card the default again in the records only: the payment by hand is the test's. */
async function refusedRenewalToPay(b: Billing): Promise<Scene> {
  const scene = await upgradedScene(b);
  const good = (await b.call("GET", `/customers/${scene.subscription.customerId}`, { headers: scene.op })).body.defaultPaymentMethodId;
  await declineNext(b, scene);
  await toPeriodEnd(b, scene);
  await b.db.update(customers).set({ defaultPaymentMethodId: good }).where(eq(customers.id, scene.subscription.customerId));
  return { ...scene, invoiceId: (await invoicesOf(b, scene))[0].id };
}

const PATHS: MoneyPath[] = [
  {
    name: "upgrade",
    prepare: async (b) => {
      const platformId = await b.newPlatform();
      return { platformId, owner: b.as.owner(platformId), op: b.as.operator(), subscription: null, idempotencyKey: key() };
    },
    act: (b, s) =>
      b.call("POST", "/api/billing/upgrade", {
        headers: s.owner,
        body: { planId: "plan_starter", paymentMethodId: s.declining ? "pm_card_chargeCustomerFail" : "pm_card_visa", billingEmail: "pay@example.com", idempotencyKey: s.idempotencyKey },
      }),
    paid: async (b, s) => {
      expect(await subscriptionOf(b, s)).toMatchObject({ tier: "starter", status: "active" });
      expect((await invoicesOf(b, s)).map((i) => [i.status, i.amountPaidCents])).toEqual([["paid", 2900]]);
    },
    declined: async (b, s, answer) => {
      expect(answer).toMatchObject({ status: 402, body: { error: { code: "PAYMENT_DECLINED" } } });
      expect((await subscriptionOf(b, s)).tier).toBe("free");
      expect((await invoicesOf(b, s)).map((i) => i.status)).toEqual(["void"]);
    },
  },
  {
    name: "change-tier",
    prepare: (b) => upgradedScene(b),
    act: (b, s) => b.call("POST", "/subscription/change-tier", { headers: { ...s.owner, "idempotency-key": s.idempotencyKey }, body: { tier: "growth" } }),
    paid: async (b, s) => {
      expect(await subscriptionOf(b, s)).toMatchObject({ tier: "growth", status: "active" });
      expect((await invoicesOf(b, s))[0]).toMatchObject({ status: "paid", lines: [expect.objectContaining({ kind: "proration" }), expect.objectContaining({ kind: "proration" })] });
    },
    declined: async (b, s, answer) => {
      expect(answer).toMatchObject({ status: 402, body: { error: { code: "PAYMENT_DECLINED", details: { code: "card_declined" } } } });
      expect((await subscriptionOf(b, s)).tier).toBe("starter");
      expect((await invoicesOf(b, s))[0].status).toBe("void");
    },
  },
  {
    name: "seats",
    prepare: async (b) => {
      const scene = await upgradedScene(b, "plan_growth");
      // a downgrade and a cancellation wait for the period's end: more seats must call neither off
      expect((await b.call("POST", "/subscription/change-tier", { headers: scene.owner, body: { tier: "starter" } })).body.subscription.pendingTier).toBe("starter");
      expect((await b.call("POST", "/subscription/cancel", { headers: scene.owner })).status).toBe(200);
      return scene;
    },
    act: (b, s) => b.call("PATCH", `/subscriptions/${s.subscription.id}`, { headers: { ...s.op, "idempotency-key": s.idempotencyKey }, body: { quantity: 3 } }),
    paid: async (b, s) => {
      expect(await subscriptionOf(b, s)).toMatchObject({ tier: "growth", quantity: 3, pendingTier: "starter", cancelAtPeriodEnd: true });
      expect((await invoicesOf(b, s))[0]).toMatchObject({ status: "paid" });
    },
    declined: async (b, s, answer) => {
      expect(answer?.status).toBe(402);
      expect(await subscriptionOf(b, s)).toMatchObject({ quantity: 1, pendingTier: "starter", cancelAtPeriodEnd: true });
    },
  },
  {
    name: "trial end",
    prepare: async (b) => {
      const scene = await upgradedScene(b);
      // three weeks in, a trial of three days: its end is charged, less the credit of the unused week
      b.clock.advance(20 * 86_400_000);
      expect((await b.call("POST", `/operator/subscriptions/${scene.subscription.id}/trial`, { headers: scene.op, body: { trialDays: 3 } })).status).toBe(200);
      return scene;
    },
    act: async (b, s) => {
      await toPeriodEnd(b, s);
      return null;
    },
    paid: async (b, s) => {
      const subscription = await subscriptionOf(b, s);
      expect(subscription).toMatchObject({ status: "active", tier: "starter", id: s.subscription.id });
      const [trialEnd] = await invoicesOf(b, s);
      expect(trialEnd).toMatchObject({ status: "paid", periodStart: subscription.currentPeriodStart });
      expect(trialEnd.amountPaidCents).toBeGreaterThan(0);
    },
    declined: async (b, s) => {
      expect(await subscriptionOf(b, s)).toMatchObject({ tier: "free" });
      expect((await invoicesOf(b, s))[0].status).toBe("void");
    },
  },
  {
    name: "renewal",
    prepare: (b) => upgradedScene(b),
    act: async (b, s) => {
      await toPeriodEnd(b, s);
      return null;
    },
    paid: async (b, s) => {
      const subscription = await subscriptionOf(b, s);
      expect(subscription).toMatchObject({ status: "active", currentPeriodStart: s.subscription.currentPeriodEnd });
      expect((await invoicesOf(b, s)).map((i) => [i.status, i.amountPaidCents])).toEqual([
        ["paid", 2900],
        ["paid", 2900],
      ]);
    },
    declined: async (b, s) => {
      expect(await subscriptionOf(b, s)).toMatchObject({ status: "past_due", tier: "starter" });
      expect((await invoicesOf(b, s))[0]).toMatchObject({ status: "open", attemptCount: 1, nextPaymentAttempt: expect.any(Number) });
    },
  },
  {
    name: "dunning retry",
    prepare: async (b) => {
      const scene = await upgradedScene(b);
      const good = (await b.call("GET", `/customers/${scene.subscription.customerId}`, { headers: scene.op })).body.defaultPaymentMethodId;
      await declineNext(b, scene);
      await toPeriodEnd(b, scene);
      expect((await subscriptionOf(b, scene)).status).toBe("past_due");
      // the good card is the default again, in the records only: the retry is the worker's
      await b.db.update(customers).set({ defaultPaymentMethodId: good }).where(eq(customers.id, scene.subscription.customerId));
      return scene;
    },
    act: async (b) => {
      b.clock.advance(86_400_000 + 60_000);
      await b.ctx.worker.pass();
      return null;
    },
    paid: async (b, s) => {
      expect(await subscriptionOf(b, s)).toMatchObject({ status: "active" });
      expect((await invoicesOf(b, s))[0]).toMatchObject({ status: "paid", amountPaidCents: 2900, attemptCount: 1 });
    },
    declined: async (b, s) => {
      expect(await subscriptionOf(b, s)).toMatchObject({ status: "past_due" });
      expect((await invoicesOf(b, s))[0]).toMatchObject({ status: "open", attemptCount: 2 });
    },
  },
  {
    name: "generate",
    prepare: async (b) => {
      const scene = await upgradedScene(b);
      await b.db.transaction((tx) => moveBalance(tx, b.clock.now(), scene.subscription.customerId, -750, { kind: "restored", description: "Owed", currency: "usd", actorType: "system", actorId: null }));
      return scene;
    },
    act: (b, s) => b.call("POST", "/operator/invoices/generate", { headers: { ...s.op, "idempotency-key": s.idempotencyKey }, body: { customerId: s.subscription.customerId } }),
    paid: async (b, s) => {
      expect((await invoicesOf(b, s))[0]).toMatchObject({ status: "paid", amountPaidCents: 750 });
    },
    declined: async (b, s, answer) => {
      expect(answer).toMatchObject({ status: 201, body: { status: "open", attemptCount: 1 } });
      expect((await invoicesOf(b, s))[0]).toMatchObject({ status: "open", attemptCount: 1 });
    },
  },
  {
    name: "operator pay",
    // the same collection as the portal's "Pay now", which the local provider's runs; Stripe's through the API
    providers: ["stripe"],
    prepare: refusedRenewalToPay,
    act: (b, s) => b.call("POST", `/operator/invoices/${s.invoiceId}/pay`, { headers: { ...s.op, "idempotency-key": s.idempotencyKey }, body: {} }),
    paid: async (b, s) => {
      expect(await subscriptionOf(b, s)).toMatchObject({ status: "active" });
      expect((await invoicesOf(b, s))[0]).toMatchObject({ id: s.invoiceId, status: "paid", amountPaidCents: 2900 });
    },
    declined: async (b, s, answer) => {
      expect(answer).toMatchObject({ status: 402, body: { error: { code: "PAYMENT_DECLINED" } } });
      expect((await invoicesOf(b, s))[0]).toMatchObject({ id: s.invoiceId, status: "open", attemptCount: 2 });
    },
  },
  {
    name: "portal pay",
    // the local provider's portal; Stripe's is Stripe's own
    providers: ["local"],
    prepare: refusedRenewalToPay,
    act: async (b, s) => {
      // a page of an hour: the person opens billing again (a retry is the same form, the same key)
      const portal = await b.call("POST", "/portal", { headers: s.owner, body: { returnUrl: "https://console.example.com/" } });
      const portalPath = new URL(portal.body.url).pathname;
      const r = await b.app.request(`${portalPath}/invoices/${s.invoiceId}/pay`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded", origin: "http://localhost" },
        body: new URLSearchParams({ key: s.idempotencyKey }).toString(),
      });
      const page = await r.text();
      // the page's answers in the API's terms: paid (the redirect to its notice), being confirmed (202), refused (402)
      if (r.status === 202) expect(page).toContain("being confirmed");
      if (r.status === 303) expect(r.headers.get("location")).toBe(`${portalPath}?notice=paid`);
      return { status: r.status === 303 ? 200 : r.status === 202 ? 503 : r.status, body: { page }, headers: r.headers };
    },
    paid: async (b, s) => {
      expect(await subscriptionOf(b, s)).toMatchObject({ status: "active" });
      expect((await invoicesOf(b, s))[0]).toMatchObject({ id: s.invoiceId, status: "paid", amountPaidCents: 2900 });
    },
    declined: async (b, s, answer) => {
      expect(answer?.status).toBe(402);
      expect(answer?.body.page).toContain("Your card was declined.");
      expect((await invoicesOf(b, s))[0]).toMatchObject({ id: s.invoiceId, status: "open", attemptCount: 2 });
    },
  },
];

/** The answers a money step may give while its provider fails: its result, or "we do not know yet". */
const allowed = (path: MoneyPath, answer: Answer | null, declining: boolean) => {
  if (answer === null) return;
  expect([200, 201, 503, ...(declining ? [402] : [])], `${path.name}: ${answer.status} ${JSON.stringify(answer.body)}`).toContain(answer.status);
  // the portal's page says it in words (its act checks them); the API says it with a code
  if (answer.status === 503 && !answer.body.page) {
    expect(answer.body.error.code).toBe("PAYMENT_PENDING");
    expect(answer.headers.get("retry-after")).toBe("60");
  }
};

/** Runs a step to its end: the fault, the step, the checks, then the client's retry with the same key. */
async function through(fb: FaultyBilling, path: MoneyPath, scene: Scene, fault: ProviderFault | null) {
  if (fault) fb.inject(fault);
  const first = await path.act(fb.b, scene);
  allowed(path, first, scene.declining === true);
  fb.clear();
  await fb.settleAll();
  const retried = first === null ? null : await path.act(fb.b, scene);
  return { first, retried };
}

// the local provider on every database; Stripe's SDK against the fake on the embedded one (the
// database changes nothing of Stripe's part). On PostgreSQL two faults stand for the five: the money
// moved and the answer lost, and nothing done and no answer (the property and crash tests run there too).
const [embedded, ...servers] = testDatabases();
const subjects = [
  { database: embedded!, provider: "local" as const, faults: PROVIDER_FAULTS },
  { database: embedded!, provider: "stripe" as const, faults: PROVIDER_FAULTS },
  ...servers.map((database) => ({ database, provider: "local" as const, faults: ["error500After", "hang"] as ProviderFault[] })),
];

/** The paths that move billing's clock to a period's end: each gets a billing of its own, where only its platforms renew. */
const MOVES_CLOCK = new Set(["trial end", "renewal", "dunning retry", "operator pay", "portal pay"]);

describe.each(subjects)("every money path against a failing provider ($provider on $database.name)", ({ database, provider, faults }) => {
  const mine = PATHS.filter((p) => !p.providers || p.providers.includes(provider));
  const groups = [mine.filter((p) => !MOVES_CLOCK.has(p.name)), ...mine.filter((p) => MOVES_CLOCK.has(p.name)).map((p) => [p])];
  for (const paths of groups) {
    describe(paths.map((p) => p.name).join(", "), () => {
      let fb: FaultyBilling;
      beforeAll(async () => {
        fb = await startFaultyBilling(database, provider);
      });
      afterAll(() => fb?.close());

      for (const path of paths) {
        it(`${path.name}: each fault ends in one charge and the paid state; a decline in nothing charged`, async () => {
          for (const fault of faults) {
            const scene = await path.prepare(fb.b);
            const { first, retried } = await through(fb, path, scene, fault);
            if (retried) {
              expect(retried.status, `${path.name} / ${fault}: the retry answers the outcome (${JSON.stringify(retried.body)})`).toBe(first!.status === 503 ? (path.name === "generate" ? 201 : 200) : first!.status);
            }
            await path.paid(fb.b, scene);
            await expectMoneyConsistent(fb);
          }
          const scene = await path.prepare(fb.b);
          if (path.name !== "upgrade") await declineNext(fb.b, scene);
          scene.declining = true;
          const { first } = await through(fb, path, scene, null);
          await path.declined(fb.b, scene, first);
          await expectMoneyConsistent(fb);
        }, 120_000);
      }
    });
  }
});

describe.each(testDatabases())("a stuck customer ($name)", (database) => {
  let b: Billing;
  /** the stuck customer's charges wait for this; everyone else's go through */
  let release: () => void = () => {};
  let stuckCustomer = "";
  const charged: string[] = [];
  beforeAll(async () => {
    const held = new Promise<void>((resolve) => (release = resolve));
    // the engine would wait a minute for an answer: long enough that nobody else's renewal may wait for this one
    b = await startBilling(database, {}, {
      chargeDeadlineMs: 60_000,
      localFaults: {
        async beforeCharge(request) {
          charged.push(request.customerId);
          if (request.customerId === stuckCustomer) await held;
        },
      },
    });
  });
  afterAll(async () => {
    release();
    await b?.close();
  });

  it("a provider that never answers for one customer delays no other customer's renewal", async () => {
    const stuck = await upgradedScene(b);
    stuckCustomer = stuck.subscription.customerId;
    b.clock.advance(1_000);
    // their periods end a second after the stuck one's: it is due first
    const others = await Promise.all([upgradedScene(b), upgradedScene(b), upgradedScene(b)]);
    b.clock.set(new Date((others[0]!.subscription.currentPeriodEnd + 60) * 1000));
    const pass = b.ctx.worker.pass();
    for (let waited = 0; ; waited += 25) {
      const paid = await Promise.all(others.map(async (o) => (await invoicesOf(b, o))[0]?.status === "paid" && (await invoicesOf(b, o)).length === 2));
      if (paid.every(Boolean)) break;
      if (waited > 30_000) expect.fail("the other customers' renewals waited for the stuck one");
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    expect(charged.indexOf(stuckCustomer)).toBeLessThan(charged.indexOf(others[0]!.subscription.customerId));
    const [inFlight] = await invoicesOf(b, stuck);
    expect(inFlight).toMatchObject({ status: "open", collection: { state: "charging" } });
    // once it answers, it is paid, once
    release();
    await pass;
    expect((await invoicesOf(b, stuck))[0]).toMatchObject({ id: inFlight.id, status: "paid", amountPaidCents: 2900 });
    const payments = await b.engine.provider.payments({ from: new Date(0), to: new Date("2100-01-01") });
    expect(payments.filter((p) => p.invoiceId === inFlight.id)).toHaveLength(1);
  }, 120_000);
});

describe.each(testDatabases().slice(0, 1))("a provider down for hours ($name)", (database) => {
  let fb: FaultyBilling;
  beforeAll(async () => {
    fb = await startFaultyBilling(database, "local");
  });
  afterAll(() => fb?.close());

  it("answers a renewal 500 after 500: the customer is never past due and no retry is used up; once it is back, one charge", async () => {
    const scene = await upgradedScene(fb.b);
    fb.inject("error500Before", { forCustomer: scene.subscription.customerId });
    await toPeriodEnd(fb.b, scene);
    for (let check = 0; check < 5; check++) {
      fb.b.clock.advance(61 * 60_000);
      await fb.b.ctx.worker.pass();
    }
    const [renewal] = await invoicesOf(fb.b, scene);
    expect(renewal).toMatchObject({ status: "open", attemptCount: 0, nextPaymentAttempt: null, collection: { state: "pending" } });
    expect(await subscriptionOf(fb.b, scene)).toMatchObject({ tier: "starter", status: "active" });
    fb.clear();
    await fb.settleAll();
    expect((await invoicesOf(fb.b, scene))[0]).toMatchObject({ id: renewal.id, status: "paid", attemptCount: 0 });
    await expectMoneyConsistent(fb);
  });
});
