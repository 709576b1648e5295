import { randomUUID } from "node:crypto";
import { eq } from "drizzle-orm";
import Stripe from "stripe";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabases } from "@core/storage";
import { creditNotes, invoices, providerEvents, webhookEvents } from "../src/db/schema.js";
import { startFakeStripe, type FakeStripe } from "./support/fake-stripe.js";
import { startBilling, type Billing } from "./support/billing.js";

const WEBHOOK_SECRET = "whsec_testsecret0123456789abcdef";
const signer = new Stripe("sk_test_signing_only_0000");

/**
 * Credit notes on the stripe provider (DESIGN §6.10), end to end: refunds made through the real SDK
 * against our fake Stripe (`refunds.create` on the invoice's PaymentIntent, with the note's key and
 * `metadata.core_credit_note_id`), and Stripe's `charge.refunded` and `charge.dispute.created` events.
 */
describe.each(testDatabases())("credit notes on Stripe ($name)", (database) => {
  let b: Billing;
  let stripe: FakeStripe;
  let op: Record<string, string>;
  beforeAll(async () => {
    stripe = await startFakeStripe();
    b = await startBilling(database, { stripe: { secretKey: stripe.secretKey, webhookSecret: WEBHOOK_SECRET, apiBase: stripe.url, timeoutMs: 1_000 } }, { chargeDeadlineMs: 10_000 });
    op = b.as.operator();
    // an endpoint takes the new events, so the outbox records them
    const hook = await b.call("POST", "/operator/webhook-endpoints", { headers: op, body: { url: "http://127.0.0.1:9/hook", events: ["credit_note.created", "invoice.disputed"] } });
    expect(hook.status).toBe(201);
  });
  afterAll(async () => {
    await b?.close();
    await stripe?.close();
  });

  const note = (invoiceId: string, body: Record<string, unknown>, headers: Record<string, string> = {}) =>
    b.call("POST", `/operator/invoices/${invoiceId}/credit-notes`, { headers: { ...op, ...headers }, body });
  const notesOf = async (invoiceId: string) => (await b.call("GET", `/invoices/${invoiceId}/credit-notes`, { headers: op })).body.data as any[];
  const invoiceOf = async (invoiceId: string) => (await b.call("GET", `/invoices/${invoiceId}`, { headers: op })).body;
  const paymentIdOf = async (invoiceId: string) => (await b.db.select({ paymentId: invoices.paymentId }).from(invoices).where(eq(invoices.id, invoiceId)))[0]!.paymentId!;
  const refundsAt = (paymentIntent: string) => stripe.refunds().filter((r) => r.paymentIntent === paymentIntent);

  function deliver(event: object) {
    const payload = JSON.stringify(event);
    const signature = signer.webhooks.generateTestHeaderString({ payload, secret: WEBHOOK_SECRET, timestamp: Math.floor(b.clock.now().getTime() / 1000) });
    return b.call("POST", "/webhooks/stripe", { headers: { "content-type": "application/json", "stripe-signature": signature }, body: payload });
  }
  const event = (type: string, object: Record<string, unknown>) => ({ id: `evt_${randomUUID().replaceAll("-", "")}`, object: "event", type, created: Math.floor(b.clock.now().getTime() / 1000), data: { object } });
  const outcomeOf = async (eventId: string) => (await b.db.select().from(providerEvents).where(eq(providerEvents.id, eventId)))[0]?.outcome;

  it("refunds to the card through refunds.create on the PaymentIntent, with the note's key and metadata; a retry with the same Idempotency-Key refunds once", async () => {
    const { invoice } = await b.upgraded("plan_starter");
    const paymentIntent = await paymentIdOf(invoice.id);
    const key = randomUUID();
    const body = { amountCents: 1200, reason: "duplicate", refundTo: "payment_method" };
    const r = await note(invoice.id, body, { "idempotency-key": key });
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({ refundState: "succeeded", refundId: expect.stringMatching(/^re_/), amountCents: 1200 });
    expect(refundsAt(paymentIntent)).toEqual([{ id: r.body.refundId, amount: 1200, paymentIntent, charge: expect.any(String), idempotencyKey: `refund:${r.body.id}`, metadata: expect.objectContaining({ core_credit_note_id: r.body.id, core_invoice_id: invoice.id }) }]);
    const again = await note(invoice.id, body, { "idempotency-key": key });
    expect(again.body).toEqual(r.body);
    expect(refundsAt(paymentIntent)).toHaveLength(1);
    expect(await invoiceOf(invoice.id)).toMatchObject({ amountRefundedCents: 1200 });
  });

  it("N requests at once with one key: one refund at Stripe", async () => {
    const { invoice } = await b.upgraded("plan_starter");
    const key = randomUUID();
    const body = { amountCents: 2900, reason: "fraudulent", refundTo: "payment_method" };
    const answers = await Promise.all(Array.from({ length: 6 }, () => note(invoice.id, body, { "idempotency-key": key })));
    expect(answers.every((a) => a.status === 201 || a.body.error?.code === "IDEMPOTENCY_KEY_IN_USE")).toBe(true);
    expect((await note(invoice.id, body, { "idempotency-key": key })).status).toBe(201);
    expect(refundsAt(await paymentIdOf(invoice.id))).toHaveLength(1);
  });

  it("a refund whose answer never comes stays pending; the worker asks Stripe again, finds the refund by its note, and settles it: one refund", async () => {
    const { invoice } = await b.upgraded("plan_starter");
    const paymentIntent = await paymentIdOf(invoice.id);
    // the first try and the SDK's two retries are carried out (the first makes the refund) and never answered
    stripe.fault(/^\/v1\/refunds$/, "silent", { times: 3, when: (params) => params.payment_intent === paymentIntent && params.amount !== undefined });
    const r = await note(invoice.id, { amountCents: 800, reason: "duplicate", refundTo: "payment_method" });
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({ refundState: "pending", refundId: null });
    expect(refundsAt(paymentIntent)).toHaveLength(1);
    b.clock.advance(10 * 60_000);
    await b.ctx.worker.pass();
    const made = refundsAt(paymentIntent);
    expect(made).toHaveLength(1);
    expect((await notesOf(invoice.id))[0]).toMatchObject({ refundState: "succeeded", refundId: made[0]!.id });
  });

  it("charge.refunded for a refund made at Stripe records an external credit note once, however often it is delivered", async () => {
    const { invoice } = await b.upgraded("plan_starter");
    const paymentIntent = await paymentIdOf(invoice.id);
    const outside = stripe.refundOutside(paymentIntent, 1000);
    const refunded = event("charge.refunded", outside.charge());
    expect((await deliver(refunded)).body).toEqual({ received: true, duplicate: false });
    const notes = await notesOf(invoice.id);
    expect(notes).toEqual([expect.objectContaining({ number: `${invoice.number}-CN1`, reason: "external", refundTo: "payment_method", refundId: outside.refund.id, refundState: "succeeded", amountCents: 1000 })]);
    expect(await invoiceOf(invoice.id)).toMatchObject({ amountRefundedCents: 1000 });
    // redelivered, and another event for the same refund (Stripe's newer events list no refunds: billing asks)
    expect((await deliver(refunded)).body.duplicate).toBe(true);
    const again = event("charge.refunded", outside.charge({ listRefunds: false }));
    expect((await deliver(again)).status).toBe(200);
    expect(await outcomeOf(again.id)).toContain("already recorded");
    expect(await notesOf(invoice.id)).toHaveLength(1);
    const sent = await b.db.select().from(webhookEvents).where(eq(webhookEvents.type, "credit_note.created"));
    expect(sent.map((e) => e.data)).toContainEqual(notes[0]);
    // what is left can still be credited by billing, and no more
    expect((await note(invoice.id, { amountCents: 1901, reason: "duplicate", refundTo: "balance" })).body.error.details.remainingCents).toBe(1900);
  });

  it("charge.refunded for billing's own refund settles its pending note and records nothing else", async () => {
    const { invoice } = await b.upgraded("plan_starter");
    const paymentIntent = await paymentIdOf(invoice.id);
    stripe.fault(/^\/v1\/refunds$/, "silent", { times: 3, when: (params) => params.payment_intent === paymentIntent && params.amount !== undefined });
    const r = await note(invoice.id, { amountCents: 500, reason: "order_change", refundTo: "payment_method" });
    expect(r.body.refundState).toBe("pending");
    const refunded = event("charge.refunded", stripe.chargeOf(paymentIntent));
    await deliver(refunded);
    await deliver(refunded);
    const notes = await notesOf(invoice.id);
    expect(notes).toEqual([expect.objectContaining({ id: r.body.id, refundState: "succeeded", refundId: refundsAt(paymentIntent)[0]!.id, reason: "order_change" })]);
    expect(await invoiceOf(invoice.id)).toMatchObject({ amountRefundedCents: 500 });
  });

  it("charge.dispute.created marks the invoice disputed and sends invoice.disputed once", async () => {
    const { invoice } = await b.upgraded("plan_starter");
    const paymentIntent = await paymentIdOf(invoice.id);
    const charge = stripe.chargeOf(paymentIntent);
    const dispute = { id: `dp_${randomUUID().replaceAll("-", "")}`, object: "dispute", amount: 2900, currency: "usd", charge: charge.id, payment_intent: paymentIntent, reason: "fraudulent", status: "needs_response" };
    expect((await deliver(event("charge.dispute.created", dispute))).status).toBe(200);
    expect(await invoiceOf(invoice.id)).toMatchObject({ disputed: true, status: "paid" });
    const second = event("charge.dispute.created", dispute);
    await deliver(second);
    expect(await outcomeOf(second.id)).toMatch(/^nothing to do/);
    const sent = (await b.db.select().from(webhookEvents).where(eq(webhookEvents.type, "invoice.disputed"))).filter((e) => (e.data as any).id === invoice.id);
    expect(sent).toHaveLength(1);
    expect(sent[0]!.data).toEqual(await invoiceOf(invoice.id));
    // a dispute of a payment that is none of billing's
    const stray = event("charge.dispute.created", { ...dispute, payment_intent: "pi_nobodys" });
    await deliver(stray);
    expect(await outcomeOf(stray.id)).toMatch(/^nothing to do/);
  });

  it("a refund made outside billing that leaves less than a note asks for: the note's refund fails, 402 REFUND_FAILED, and it may be credited again", async () => {
    const { invoice } = await b.upgraded("plan_starter");
    const paymentIntent = await paymentIdOf(invoice.id);
    stripe.refundOutside(paymentIntent, 2500);
    const r = await note(invoice.id, { amountCents: 1000, reason: "duplicate", refundTo: "payment_method" });
    expect(r.status).toBe(402);
    expect(r.body.error).toMatchObject({ code: "REFUND_FAILED", details: { code: "amount_too_large" } });
    const [row] = await b.db.select().from(creditNotes).where(eq(creditNotes.invoiceId, invoice.id));
    expect(row).toMatchObject({ refundState: "failed", refundFailure: "amount_too_large" });
    expect(await invoiceOf(invoice.id)).toMatchObject({ amountRefundedCents: 0 });
  });
});
