import { randomUUID } from "node:crypto";
import { isNotNull, sql } from "drizzle-orm";
import { expect } from "vitest";
import { rowsOf, type TestDatabase } from "@core/storage";
import { invoices } from "../../src/db/schema.js";
import { reconcilePayments } from "../../src/payments-reconcile.js";
import type { ChargeRequest } from "../../src/provider/types.js";
import { startBilling, type Billing } from "./billing.js";
import { startFakeStripe, type FakeStripe } from "./fake-stripe.js";

/**
 * A payment provider that misbehaves the way payment providers do (DESIGN §6.9 proof), for both
 * implementations: the local provider through its fault hooks, Stripe's real SDK against our fake
 * server. A fault holds for one charge (every try the SDK makes of it):
 * - `hangAfterCharge`: the money moves, and no answer comes before the client gives up;
 * - `dropAfterCharge`: the money moves, and the connection is reset;
 * - `error500Before`: a 500 before anything happens;
 * - `error500After`: the money moves, and the answer is a 500;
 * - `hang`: nothing happens, and no answer comes.
 */
export type ProviderFault = "hangAfterCharge" | "dropAfterCharge" | "error500Before" | "error500After" | "hang";
export const PROVIDER_FAULTS: ProviderFault[] = ["hangAfterCharge", "dropAfterCharge", "error500Before", "error500After", "hang"];

export interface FaultyBilling {
  b: Billing;
  provider: "local" | "stripe";
  /** the fake Stripe server (null on the local provider) */
  stripe: FakeStripe | null;
  /** the next charge meets this fault (all its tries); `forCustomer` keeps it on one customer's charges, every one, until `clear` */
  inject(fault: ProviderFault, options?: { forCustomer?: string }): void;
  clear(): void;
  /** the provider's own record of money taken: succeeded payments by invoice id */
  paymentsByInvoice(): Promise<Map<string, string[]>>;
  /** moves the wall clock past every check due and runs the worker until no payment is in flight */
  settleAll(): Promise<void>;
  close(): Promise<void>;
}

const never = () => new Promise<never>(() => {});

/** How long the engine waits for a charge in these tests: short, so a hang costs little. */
const LOCAL_DEADLINE_MS = 250;
/** Stripe's SDK in these tests: 300 ms a try, one try (its own retries are stripe-provider.test.ts's): the engine's checks do the rest */
const STRIPE_TRIES = 1;

export async function startFaultyBilling(database: TestDatabase, provider: "local" | "stripe", config: Parameters<typeof startBilling>[1] = {}): Promise<FaultyBilling> {
  if (provider === "local") {
    const queue: { fault: ProviderFault; customer?: string }[] = [];
    const sticky: { fault: ProviderFault; customer: string }[] = [];
    const meeting = new Map<string, ProviderFault>();
    const take = (request: ChargeRequest): ProviderFault | undefined => {
      const held = sticky.find((s) => s.customer === request.customerId);
      if (held) return held.fault;
      const next = queue.shift();
      return next?.fault;
    };
    const b = await startBilling(database, config, {
      chargeDeadlineMs: LOCAL_DEADLINE_MS,
      localFaults: {
        async beforeCharge(request) {
          const fault = take(request);
          if (fault === "error500Before") throw new Error("the provider answered 500");
          if (fault === "hang") return never();
          if (fault) meeting.set(request.idempotencyKey, fault);
        },
        async afterCharge(request) {
          const fault = meeting.get(request.idempotencyKey);
          meeting.delete(request.idempotencyKey);
          if (fault === "error500After") throw new Error("the provider answered 500 after charging");
          if (fault === "dropAfterCharge") throw Object.assign(new Error("socket hang up"), { code: "ECONNRESET" });
          if (fault === "hangAfterCharge") return never();
        },
      },
    });
    return {
      b,
      provider,
      stripe: null,
      inject: (fault, options = {}) => (options.forCustomer ? sticky.push({ fault, customer: options.forCustomer }) : queue.push({ fault })),
      clear: () => {
        queue.splice(0);
        sticky.splice(0);
      },
      paymentsByInvoice: () => localPayments(b),
      settleAll: () => settleAll(b),
      close: () => b.close(),
    };
  }
  // Stripe's clock is the test's: a charge's creation time sits beside billing's wall clock
  let clock = () => Date.now();
  const stripe: FakeStripe = await startFakeStripe({ now: () => clock() });
  const b = await startBilling(database, {
    ...config,
    stripe: { secretKey: stripe.secretKey, webhookSecret: "whsec_faultsfaultsfaults", apiBase: stripe.url, timeoutMs: 300, maxNetworkRetries: STRIPE_TRIES - 1 },
  });
  clock = () => b.clock.now().getTime();
  const kinds = { hangAfterCharge: "silent", dropAfterCharge: "drop", error500Before: "error500", error500After: "error500After", hang: "hang" } as const;
  const customers = new Map<string, string>();
  const stripeCustomerOf = async (customerId: string) => {
    if (!customers.has(customerId)) {
      const [row] = rowsOf<{ id: string }>(await b.db.execute(sql`select provider_customer_id as id from billing.customers where id = ${customerId}`));
      customers.set(customerId, row!.id);
    }
    return customers.get(customerId)!;
  };
  const sticky: { fault: ProviderFault; customer: string }[] = [];
  return {
    b,
    provider,
    stripe,
    inject: (fault, options = {}) => {
      // the charge's create, not the reads of a check
      if (!options.forCustomer) return stripe.fault(/^\/v1\/payment_intents$/, kinds[fault], { times: STRIPE_TRIES, when: (params) => params.amount !== undefined });
      sticky.push({ fault, customer: options.forCustomer });
      void stripeCustomerOf(options.forCustomer).then((stripeId) =>
        stripe.fault(/^\/v1\/payment_intents$/, kinds[fault], { times: Infinity, when: (params) => params.amount !== undefined && params.customer === stripeId }),
      );
    },
    clear: () => {
      stripe.clearFaults();
      sticky.splice(0);
    },
    paymentsByInvoice: async () => group(stripe.succeededCharges().map((c) => [c.invoiceId ?? "(none)", c.id])),
    settleAll: () => settleAll(b),
    close: async () => {
      await b.close();
      await stripe.close();
    },
  };
}

/** The local provider's succeeded charges (its own table), by invoice id. */
export async function localPayments(b: Billing): Promise<Map<string, string[]>> {
  return group((await b.engine.provider.payments({ from: new Date(0), to: new Date("2100-01-01") })).map((p) => [p.invoiceId, p.id]));
}

function group(pairs: [string, string][]): Map<string, string[]> {
  const byKey = new Map<string, string[]>();
  for (const [key, value] of pairs) byKey.set(key, [...(byKey.get(key) ?? []), value]);
  return byKey;
}

/** Past every check that could be due (an hour and a minute) and the worker, until nothing is in flight. */
async function settleAll(b: Billing): Promise<void> {
  for (let round = 0; round < 12; round++) {
    const inFlight = await b.db.select({ id: invoices.id }).from(invoices).where(isNotNull(invoices.collectionState));
    if (inFlight.length === 0) return;
    b.clock.advance(61 * 60_000);
    await b.ctx.worker.pass();
  }
  const left = await b.db.select({ id: invoices.id, state: invoices.collectionState }).from(invoices).where(isNotNull(invoices.collectionState));
  expect.fail(`payments still in flight after 12 rounds of checks: ${JSON.stringify(left)}`);
}

/**
 * DESIGN §6.9's invariants, over everything billing holds: exactly one payment per invoice paid with
 * money, no payment without a paid invoice (of its amount), nothing in flight, and
 * `payments/reconcile` agrees.
 */
export async function expectMoneyConsistent(fb: Pick<FaultyBilling, "b" | "paymentsByInvoice">): Promise<void> {
  const payments = await fb.paymentsByInvoice();
  const rows = await fb.b.db.select().from(invoices);
  const byId = new Map(rows.map((row) => [row.id, row]));
  for (const row of rows) {
    expect(row.collectionState, `invoice ${row.id} still in flight`).toBeNull();
    if (row.status === "paid" && row.amountPaidCents > 0) expect(payments.get(row.id) ?? [], `payments of paid invoice ${row.id}`).toHaveLength(1);
    if (row.status !== "paid") expect(payments.get(row.id) ?? [], `payments of ${row.status} invoice ${row.id}`).toEqual([]);
  }
  for (const [invoiceId, ids] of payments) {
    const invoice = byId.get(invoiceId);
    expect(invoice?.status, `invoice ${invoiceId} of payments ${ids.join(", ")}`).toBe("paid");
  }
  const reconciled = await reconcilePayments(fb.b.engine, { from: new Date(0), to: new Date("2100-01-01") });
  expect(reconciled).toMatchObject({ consistent: true, unmatchedPayments: [], paidWithoutPayment: [], duplicatePayments: [] });
}

export const key = () => randomUUID();
