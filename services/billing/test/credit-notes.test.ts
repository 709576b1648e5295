import { randomUUID } from "node:crypto";
import { and, eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabases } from "@core/storage";
import { creditedTaxCents } from "../src/credit-notes.js";
import { balanceLedger, charges, creditNotes, invoices, operatorAudit, refunds, webhookEvents } from "../src/db/schema.js";
import type { LocalProviderFaults } from "../src/provider/local.js";
import { startBilling, unique, type Billing } from "./support/billing.js";

describe("the tax part of a credit note (DESIGN §6.10)", () => {
  it("is in proportion to the invoice's tax, rounded once half away from zero, on everything credited so far", () => {
    // 2900 + 19 % = 551 tax, 3451 total: 1000 of it holds 159.66… tax
    expect(creditedTaxCents({ taxCents: 551, totalCents: 3451 }, 0, 0, 1000)).toBe(160);
    // the rest of the invoice credits exactly the rest of its tax: the sum is the invoice's tax, never more
    expect(creditedTaxCents({ taxCents: 551, totalCents: 3451 }, 1000, 160, 2451)).toBe(391);
    // half a cent goes away from zero
    expect(creditedTaxCents({ taxCents: 1, totalCents: 2 }, 0, 0, 1)).toBe(1);
    expect(creditedTaxCents({ taxCents: 1, totalCents: 2 }, 1, 1, 1)).toBe(0);
    // many small notes never credit more tax than the whole would
    let credited = 0;
    let tax = 0;
    for (let i = 0; i < 3451; i += 7) {
      const amount = Math.min(7, 3451 - i);
      tax += creditedTaxCents({ taxCents: 551, totalCents: 3451 }, credited, tax, amount);
      credited += amount;
      expect(tax).toBeLessThanOrEqual(551);
    }
    expect(tax).toBe(551);
    expect(creditedTaxCents({ taxCents: 0, totalCents: 2900 }, 0, 0, 2900)).toBe(0);
  });
});

describe.each(testDatabases())("credit notes, refunds and debits on $name", (database) => {
  let b: Billing;
  let op: Record<string, string>;
  const faults: LocalProviderFaults = {};
  beforeAll(async () => {
    b = await startBilling(database, {}, { localFaults: faults });
    op = b.as.operator();
  });
  afterAll(() => b?.close());

  const note = (invoiceId: string, body: Record<string, unknown>, headers: Record<string, string> = {}) =>
    b.call("POST", `/operator/invoices/${invoiceId}/credit-notes`, { headers: { ...op, ...headers }, body });
  const notesOf = async (invoiceId: string, headers = op) => (await b.call("GET", `/invoices/${invoiceId}/credit-notes`, { headers })).body.data as any[];
  const invoiceOf = async (invoiceId: string) => (await b.call("GET", `/invoices/${invoiceId}`, { headers: op })).body;
  const balanceOf = async (customerId: string): Promise<number> => (await b.call("GET", `/customers/${customerId}`, { headers: op })).body.balanceCents;
  /** the local provider's refunds of the charge that paid the invoice */
  const refundsOf = async (invoiceId: string) => {
    const [row] = await b.db.select({ paymentId: invoices.paymentId }).from(invoices).where(eq(invoices.id, invoiceId));
    return b.db.select().from(refunds).where(eq(refunds.chargeId, row!.paymentId!));
  };
  const paidStarter = async () => {
    const up = await b.upgraded("plan_starter");
    expect(up.invoice).toMatchObject({ status: "paid", amountPaidCents: 2900, amountRefundedCents: 0, amountCreditedCents: 0, disputed: false });
    return { ...up, invoiceId: up.invoice.id as string, customerId: up.subscription.customerId as string };
  };

  describe("POST /operator/invoices/{id}/credit-notes", () => {
    it("refunds to the card through the provider, once, against the charge that paid the invoice", async () => {
      const { invoiceId, invoice, customerId } = await paidStarter();
      const r = await note(invoiceId, { amountCents: 1000, reason: "duplicate", refundTo: "payment_method", memo: "Charged twice" });
      expect(r.status).toBe(201);
      expect(r.body).toEqual({
        id: expect.stringMatching(/^cn_/),
        number: `${invoice.number}-CN1`,
        invoiceId,
        customerId,
        amountCents: 1000,
        taxCents: 0,
        currency: "usd",
        reason: "duplicate",
        refundTo: "payment_method",
        refundId: expect.stringMatching(/^re_/),
        refundState: "succeeded",
        status: "issued",
        memo: "Charged twice",
        createdAt: expect.any(Number),
      });
      const made = await refundsOf(invoiceId);
      expect(made.map((m) => [m.id, m.amountCents, m.status, m.idempotencyKey])).toEqual([[r.body.refundId, 1000, "succeeded", `refund:${r.body.id}`]]);
      expect(await invoiceOf(invoiceId)).toMatchObject({ status: "paid", amountPaidCents: 2900, amountRefundedCents: 1000, amountCreditedCents: 0 });
      // the card's refund leaves the balance alone
      expect(await balanceOf(customerId)).toBe(0);
      const [audit] = await b.db.select().from(operatorAudit).where(and(eq(operatorAudit.action, "credit_note.create"), eq(operatorAudit.targetId, r.body.id)));
      expect(audit?.after).toMatchObject({ invoiceId, amountCents: 1000, refundTo: "payment_method", refundState: "succeeded" });
    });

    it("credits the balance through the ledger (kind credit_note), and the next invoice uses it", async () => {
      const { invoiceId, invoice, customerId, platformId } = await paidStarter();
      const r = await note(invoiceId, { amountCents: 700, reason: "product_unsatisfactory", refundTo: "balance" });
      expect(r.status).toBe(201);
      expect(r.body).toMatchObject({ number: `${invoice.number}-CN1`, refundTo: "balance", refundId: null, refundState: null, memo: null });
      expect(await balanceOf(customerId)).toBe(700);
      const ledger = await b.db.select().from(balanceLedger).where(eq(balanceLedger.customerId, customerId));
      expect(ledger.filter((l) => l.kind === "credit_note").map((l) => [l.amountCents, l.invoiceId, l.balanceAfterCents])).toEqual([[700, invoiceId, 700]]);
      expect(await refundsOf(invoiceId)).toEqual([]);
      expect(await invoiceOf(invoiceId)).toMatchObject({ amountRefundedCents: 0, amountCreditedCents: 700 });
      const preview = (await b.call("GET", `/invoices/upcoming?platformId=${platformId}`, { headers: op })).body;
      expect(preview).toMatchObject({ creditAppliedCents: 700, amountDueCents: 2200 });
    });

    it("numbers partial notes CN1, CN2 …; never gives back more than was paid: 409 CREDIT_EXCEEDS_PAID says what is left", async () => {
      const { invoiceId, invoice } = await paidStarter();
      expect((await note(invoiceId, { amountCents: 1200, reason: "order_change", refundTo: "payment_method" })).body.number).toBe(`${invoice.number}-CN1`);
      expect((await note(invoiceId, { amountCents: 1000, reason: "order_change", refundTo: "balance" })).body.number).toBe(`${invoice.number}-CN2`);
      const over = await note(invoiceId, { amountCents: 701, reason: "order_change", refundTo: "payment_method" });
      expect(over.status).toBe(409);
      expect(over.body.error).toMatchObject({ code: "CREDIT_EXCEEDS_PAID", details: { amountPaidCents: 2900, amountRefundedCents: 1200, amountCreditedCents: 1000, remainingCents: 700 } });
      // just inside: the 700 left
      const last = await note(invoiceId, { amountCents: 700, reason: "order_change", refundTo: "payment_method" });
      expect(last.status).toBe(201);
      expect(last.body.number).toBe(`${invoice.number}-CN3`);
      expect((await note(invoiceId, { amountCents: 1, reason: "order_change", refundTo: "balance" })).body.error.details.remainingCents).toBe(0);
      expect((await notesOf(invoiceId)).map((n) => [n.number, n.amountCents, n.refundTo])).toEqual([
        [`${invoice.number}-CN1`, 1200, "payment_method"],
        [`${invoice.number}-CN2`, 1000, "balance"],
        [`${invoice.number}-CN3`, 700, "payment_method"],
      ]);
      expect((await refundsOf(invoiceId)).reduce((sum, r) => sum + r.amountCents, 0)).toBe(1900);
      expect(await invoiceOf(invoiceId)).toMatchObject({ amountPaidCents: 2900, amountRefundedCents: 1900, amountCreditedCents: 1000 });
    });

    it("the database refuses more credit than was paid whatever a writer does (CHECK invoices_credit_within_paid)", async () => {
      const { invoiceId } = await paidStarter();
      await expect(b.db.update(invoices).set({ amountCreditedCents: 2901 }).where(eq(invoices.id, invoiceId))).rejects.toThrow();
    });

    it("10 notes of 40 % at once with different keys: exactly 2 are issued, the others 409 CREDIT_EXCEEDS_PAID", async () => {
      const { invoiceId } = await paidStarter();
      const answers = await Promise.all(
        Array.from({ length: 10 }, (_, i) => note(invoiceId, { amountCents: 1160, reason: "duplicate", refundTo: i % 2 === 0 ? "payment_method" : "balance" }, { "idempotency-key": randomUUID() })),
      );
      expect(answers.filter((a) => a.status === 201)).toHaveLength(2);
      expect(answers.filter((a) => a.status === 409).map((a) => a.body.error.code)).toEqual(Array(8).fill("CREDIT_EXCEEDS_PAID"));
      const inv = await invoiceOf(invoiceId);
      expect(inv.amountRefundedCents + inv.amountCreditedCents).toBe(2320);
      expect(await notesOf(invoiceId)).toHaveLength(2);
      const toCard = answers.filter((a) => a.status === 201 && a.body.refundTo === "payment_method").length;
      expect((await refundsOf(invoiceId)).length).toBe(toCard);
    });

    it("a retry with the same Idempotency-Key answers the first note and refunds once; another body under it is 422", async () => {
      const { invoiceId } = await paidStarter();
      const key = randomUUID();
      const body = { amountCents: 1500, reason: "duplicate", refundTo: "payment_method" };
      const first = await note(invoiceId, body, { "idempotency-key": key });
      const again = await note(invoiceId, body, { "idempotency-key": key });
      expect(first.status).toBe(201);
      expect(again.status).toBe(201);
      expect(again.headers.get("idempotent-replayed")).toBe("true");
      expect(again.body).toEqual(first.body);
      expect(await refundsOf(invoiceId)).toHaveLength(1);
      expect(await notesOf(invoiceId)).toHaveLength(1);
      const other = await note(invoiceId, { ...body, amountCents: 1400 }, { "idempotency-key": key });
      expect(other.status).toBe(422);
      expect(other.body.error.code).toBe("IDEMPOTENCY_KEY_REUSED");
    });

    it("8 requests at once with one key: one note, one refund at the provider", async () => {
      const { invoiceId } = await paidStarter();
      const key = randomUUID();
      const body = { amountCents: 2000, reason: "fraudulent", refundTo: "payment_method" };
      const answers = await Promise.all(Array.from({ length: 8 }, () => note(invoiceId, body, { "idempotency-key": key })));
      expect(answers.every((a) => a.status === 201 || (a.status === 409 && a.body.error.code === "IDEMPOTENCY_KEY_IN_USE"))).toBe(true);
      const settled = await note(invoiceId, body, { "idempotency-key": key });
      expect(settled.status).toBe(201);
      for (const a of answers.filter((x) => x.status === 201)) expect(a.body.id).toBe(settled.body.id);
      expect(await refundsOf(invoiceId)).toHaveLength(1);
      expect(await notesOf(invoiceId)).toHaveLength(1);
      expect((await invoiceOf(invoiceId)).amountRefundedCents).toBe(2000);
    });

    it("an unknown refund outcome stays pending; the worker asks again with the same key and settles it, refunding once", async () => {
      const { invoiceId } = await paidStarter();
      // the provider makes the refund and its answer is lost
      let lost = 1;
      faults.afterRefund = async () => {
        if (lost-- > 0) throw new Error("connection reset after the refund");
      };
      const r = await note(invoiceId, { amountCents: 900, reason: "duplicate", refundTo: "payment_method" }, { "idempotency-key": randomUUID() });
      expect(r.status).toBe(201);
      expect(r.body).toMatchObject({ refundState: "pending", refundId: null });
      expect(await refundsOf(invoiceId)).toHaveLength(1);
      // not due yet: the worker leaves it
      await b.ctx.worker.pass();
      expect((await notesOf(invoiceId))[0].refundState).toBe("pending");
      const [row] = await b.db.select().from(creditNotes).where(eq(creditNotes.id, r.body.id));
      b.clock.advance(row!.refundNextCheckAt!.getTime() - b.clock.now().getTime() + 1_000);
      await b.ctx.worker.pass();
      const made = await refundsOf(invoiceId);
      expect(made).toHaveLength(1);
      expect((await notesOf(invoiceId))[0]).toMatchObject({ refundState: "succeeded", refundId: made[0]!.id });
      expect((await invoiceOf(invoiceId)).amountRefundedCents).toBe(900);
      faults.afterRefund = undefined;
    });

    it("a provider that cannot be reached refunds nothing; the worker's check makes the refund, with the note's key", async () => {
      const { invoiceId } = await paidStarter();
      faults.beforeRefund = async () => {
        throw new Error("provider unavailable");
      };
      const r = await note(invoiceId, { amountCents: 500, reason: "duplicate", refundTo: "payment_method" });
      expect(r.body.refundState).toBe("pending");
      expect(await refundsOf(invoiceId)).toEqual([]);
      faults.beforeRefund = undefined;
      b.clock.advance(10 * 60_000);
      await b.ctx.worker.pass();
      const made = await refundsOf(invoiceId);
      expect(made.map((m) => [m.amountCents, m.idempotencyKey])).toEqual([[500, `refund:${r.body.id}`]]);
      expect((await notesOf(invoiceId))[0]).toMatchObject({ refundState: "succeeded", refundId: made[0]!.id });
    });

    it("a refund the provider refuses is 402 REFUND_FAILED: nothing refunded, the note says so, and its amount may be credited again", async () => {
      const { invoiceId } = await paidStarter();
      const [row] = await b.db.select().from(invoices).where(eq(invoices.id, invoiceId));
      // 2000 of the charge was refunded at the provider already, unknown to billing
      const outside = await b.engine.provider.refund({ creditNoteId: "cn_outside", invoiceId, customerId: row!.customerId, paymentId: row!.paymentId!, amountCents: 2000, currency: "usd", idempotencyKey: "outside" });
      expect(outside.status).toBe("succeeded");
      const key = randomUUID();
      const r = await note(invoiceId, { amountCents: 1000, reason: "duplicate", refundTo: "payment_method" }, { "idempotency-key": key });
      expect(r.status).toBe(402);
      expect(r.body.error).toMatchObject({ code: "REFUND_FAILED", details: { code: "amount_too_large", creditNoteId: expect.stringMatching(/^cn_/) } });
      // stored, as a decline is: the retry hears the same
      expect((await note(invoiceId, { amountCents: 1000, reason: "duplicate", refundTo: "payment_method" }, { "idempotency-key": key })).status).toBe(402);
      expect((await notesOf(invoiceId)).map((n) => n.refundState)).toEqual(["failed"]);
      expect((await invoiceOf(invoiceId)).amountRefundedCents).toBe(0);
      const rest = await note(invoiceId, { amountCents: 900, reason: "duplicate", refundTo: "payment_method" });
      expect(rest.status).toBe(201);
      expect(rest.body.refundState).toBe("succeeded");
    });

    it("409 INVOICE_NOT_PAID on a void invoice; 404 on an unknown one; 409 NO_PAYMENT_TO_REFUND without a provider payment", async () => {
      const platformId = await b.newPlatform();
      const declined = await b.call("POST", "/api/billing/upgrade", {
        headers: b.as.owner(platformId),
        body: { planId: "plan_starter", paymentMethodId: "pm_card_chargeCustomerFail", billingEmail: "b@example.com", idempotencyKey: randomUUID() },
      });
      expect(declined.status).toBe(402);
      const [voided] = await b.db.select().from(invoices).where(eq(invoices.platformId, platformId));
      expect(voided!.status).toBe("void");
      const r = await note(voided!.id, { amountCents: 100, reason: "duplicate", refundTo: "balance" });
      expect(r.status).toBe(409);
      expect(r.body.error.code).toBe("INVOICE_NOT_PAID");
      const missing = await note("in_nosuchinvoice", { amountCents: 100, reason: "duplicate", refundTo: "balance" });
      expect(missing.status).toBe(404);
      // an invoice paid before billing kept the provider's payment id: it can be credited to the balance only
      const { invoiceId } = await paidStarter();
      await b.db.update(invoices).set({ paymentId: null }).where(eq(invoices.id, invoiceId));
      const noPayment = await note(invoiceId, { amountCents: 100, reason: "duplicate", refundTo: "payment_method" });
      expect(noPayment.status).toBe(409);
      expect(noPayment.body.error.code).toBe("NO_PAYMENT_TO_REFUND");
      expect((await note(invoiceId, { amountCents: 100, reason: "duplicate", refundTo: "balance" })).status).toBe(201);
    });

    it.each([
      ["amountCents 0", { amountCents: 0, reason: "duplicate", refundTo: "balance" }],
      ["amountCents negative", { amountCents: -5, reason: "duplicate", refundTo: "balance" }],
      ["amountCents a fraction", { amountCents: 1.5, reason: "duplicate", refundTo: "balance" }],
      ["amountCents a string", { amountCents: "100", reason: "duplicate", refundTo: "balance" }],
      ["reason external (the provider's, not an operator's)", { amountCents: 100, reason: "external", refundTo: "balance" }],
      ["an unknown refundTo", { amountCents: 100, reason: "duplicate", refundTo: "card" }],
      ["no reason", { amountCents: 100, refundTo: "balance" }],
      ["a memo of 501 characters", { amountCents: 100, reason: "duplicate", refundTo: "balance", memo: "m".repeat(501) }],
      ["an unknown field", { amountCents: 100, reason: "duplicate", refundTo: "balance", tax: 5 }],
    ])("400 VALIDATION_ERROR for %s, and nothing is written", async (_, body) => {
      const { invoiceId } = await paidStarter();
      const r = await note(invoiceId, body);
      expect(r.status).toBe(400);
      expect(r.body.error.code).toBe("VALIDATION_ERROR");
      expect(await notesOf(invoiceId)).toEqual([]);
    });

    it("a memo of 500 characters is taken", async () => {
      const { invoiceId } = await paidStarter();
      expect((await note(invoiceId, { amountCents: 100, reason: "duplicate", refundTo: "balance", memo: "m".repeat(500) })).status).toBe(201);
    });

    it("is for operators: 401 without a credential, 403 for the tenant's owner", async () => {
      const { invoiceId, owner } = await paidStarter();
      const body = { amountCents: 100, reason: "duplicate", refundTo: "balance" };
      expect((await b.call("POST", `/operator/invoices/${invoiceId}/credit-notes`, { body })).status).toBe(401);
      expect((await b.call("POST", `/operator/invoices/${invoiceId}/credit-notes`, { headers: owner, body })).status).toBe(403);
      expect(await notesOf(invoiceId)).toEqual([]);
    });

    it("sends credit_note.created with the note as GET lists it", async () => {
      const hook = await b.call("POST", "/operator/webhook-endpoints", { headers: op, body: { url: "http://127.0.0.1:9/hook", events: ["credit_note.created"] } });
      expect(hook.status).toBe(201);
      try {
        const { invoiceId } = await paidStarter();
        const r = await note(invoiceId, { amountCents: 300, reason: "duplicate", refundTo: "balance" });
        const events = await b.db.select().from(webhookEvents).where(eq(webhookEvents.type, "credit_note.created"));
        expect(events.map((e) => e.data)).toContainEqual((await notesOf(invoiceId))[0]);
        expect(r.body).toEqual((await notesOf(invoiceId))[0]);
      } finally {
        await b.call("DELETE", `/operator/webhook-endpoints/${hook.body.id}`, { headers: op });
      }
    });
  });

  describe("GET /invoices/{id}/credit-notes", () => {
    it("reads as the invoice reads: its tenant (both prefixes), operators; 404 for another tenant", async () => {
      const { invoiceId, owner, platformId } = await paidStarter();
      const r = await note(invoiceId, { amountCents: 100, reason: "duplicate", refundTo: "balance" });
      expect(await notesOf(invoiceId, owner)).toEqual([r.body]);
      expect(await notesOf(invoiceId, b.as.member(platformId))).toEqual([r.body]);
      expect((await b.call("GET", `/api/billing/invoices/${invoiceId}/credit-notes`, { headers: owner })).body.data).toEqual([r.body]);
      const stranger = b.as.owner(await b.newPlatform());
      const hidden = await b.call("GET", `/invoices/${invoiceId}/credit-notes`, { headers: stranger });
      expect(hidden.status).toBe(404);
      expect(JSON.stringify(hidden.body)).not.toContain(platformId);
      expect((await b.call("GET", `/invoices/${invoiceId}/credit-notes`)).status).toBe(401);
      expect((await b.call("GET", `/invoices/in_nosuch/credit-notes`, { headers: op })).status).toBe(404);
    });
  });

  describe("POST /operator/debits", () => {
    const debit = (customerId: string, amount: unknown, extra: Record<string, unknown> = {}, headers = op) =>
      b.call("POST", "/operator/debits", { headers, body: { customerId, amount, description: "Credit given by mistake", ...extra } });

    it("lowers the balance through the ledger (kind debit), and the next invoice carries it as a carried line", async () => {
      const { customerId, platformId } = await paidStarter();
      const r = await debit(customerId, "4.35");
      expect(r.status).toBe(201);
      expect(r.body).toEqual({ customerId, amountCents: 435, currency: "usd", description: "Credit given by mistake", balanceCents: -435 });
      const ledger = await b.db.select().from(balanceLedger).where(eq(balanceLedger.customerId, customerId));
      expect(ledger.filter((l) => l.kind === "debit").map((l) => [l.amountCents, l.balanceAfterCents])).toEqual([[-435, -435]]);
      const [audit] = await b.db.select().from(operatorAudit).where(and(eq(operatorAudit.action, "debit.grant"), eq(operatorAudit.targetId, customerId)));
      expect(audit).toMatchObject({ before: { balanceCents: 0 }, after: { balanceCents: -435, amountCents: 435 } });
      // the renewal charges the period and the debt
      const sub = (await b.call("GET", `/subscription?platformId=${platformId}`, { headers: op })).body;
      b.clock.advance(sub.currentPeriodEnd * 1000 - b.clock.now().getTime() + 60_000);
      await b.ctx.worker.pass();
      const [renewal] = (await b.call("GET", `/invoices?platformId=${platformId}&limit=1`, { headers: op })).body.data;
      expect(renewal).toMatchObject({ status: "paid", subtotalCents: 3335, amountPaidCents: 3335 });
      expect(renewal.lines.find((l: any) => l.kind === "carried")).toMatchObject({ amountCents: 435 });
      expect(await balanceOf(customerId)).toBe(0);
      const charged = await b.db.select().from(charges).where(eq(charges.invoiceId, renewal.id));
      expect(charged.map((c) => c.amountCents)).toEqual([3335]);
    });

    it("takes back a credit given by mistake", async () => {
      const customerId = (await b.call("POST", "/customers", { headers: op, body: { email: `${unique("c")}@example.com` } })).body.id;
      expect((await b.call("POST", "/operator/credits", { headers: op, body: { customerId, amount: 12.5, description: "oops" } })).status).toBe(201);
      expect((await debit(customerId, 12.5)).body.balanceCents).toBe(0);
    });

    it.each([
      [0, ">0"],
      ["0.00", "more than 0"],
      ["1.234", "2 decimal places"],
      ["-1", "plain decimal"],
      ["1e3", "plain decimal"],
    ])("400 for amount %j (%s), and the balance stays", async (amount, message) => {
      const { customerId } = await paidStarter();
      const r = await debit(customerId, amount);
      expect(r.status).toBe(400);
      expect(JSON.stringify(r.body.error)).toContain(message);
      expect(await balanceOf(customerId)).toBe(0);
    });

    it("takes the smallest amount, 0.01; 409 CURRENCY_MISMATCH in another currency; 404 for an unknown customer; 403 for a tenant", async () => {
      const { customerId, owner } = await paidStarter();
      expect((await debit(customerId, "0.01")).body.balanceCents).toBe(-1);
      const other = await debit(customerId, "1.00", { currency: "eur" });
      expect(other.status).toBe(409);
      expect(other.body.error.code).toBe("CURRENCY_MISMATCH");
      expect((await debit("cus_nosuch", "1.00")).status).toBe(404);
      expect((await debit(customerId, "1.00", {}, owner)).status).toBe(403);
      expect(await balanceOf(customerId)).toBe(-1);
    });

    it("is idempotent with a key: a retry debits once", async () => {
      const { customerId } = await paidStarter();
      const key = randomUUID();
      const answers = await Promise.all([1, 2, 3].map(() => b.call("POST", "/operator/debits", { headers: { ...op, "idempotency-key": key }, body: { customerId, amount: "2.00", description: "once" } })));
      expect(answers.some((a) => a.status === 201)).toBe(true);
      expect((await b.call("POST", "/operator/debits", { headers: { ...op, "idempotency-key": key }, body: { customerId, amount: "2.00", description: "once" } })).status).toBe(201);
      expect(await balanceOf(customerId)).toBe(-200);
    });
  });
});

describe.each(testDatabases())("credit notes on a taxed invoice ($name)", (database) => {
  let b: Billing;
  beforeAll(async () => {
    b = await startBilling(database, { taxPercent: "19" });
  });
  afterAll(() => b?.close());

  it("credits the tax in proportion, and all the notes together credit exactly the invoice's tax", async () => {
    const op = b.as.operator();
    const { invoice } = await b.upgraded("plan_starter");
    expect(invoice).toMatchObject({ subtotalCents: 2900, taxCents: 551, totalCents: 3451, amountPaidCents: 3451 });
    const first = await b.call("POST", `/operator/invoices/${invoice.id}/credit-notes`, { headers: op, body: { amountCents: 1000, reason: "duplicate", refundTo: "payment_method" } });
    expect(first.body).toMatchObject({ amountCents: 1000, taxCents: 160 });
    const rest = await b.call("POST", `/operator/invoices/${invoice.id}/credit-notes`, { headers: op, body: { amountCents: 2451, reason: "duplicate", refundTo: "balance" } });
    expect(rest.body).toMatchObject({ amountCents: 2451, taxCents: 391 });
    expect(first.body.taxCents + rest.body.taxCents).toBe(551);
  });
});
