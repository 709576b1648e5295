import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabases } from "@core/storage";
import { invoices } from "../src/db/schema.js";
import { startBilling, type Billing, type Headers } from "./support/billing.js";

/** What an invoice's intent may show: what becomes true once it is paid, never how (cards, metadata, amounts). */
const INTENT_FIELDS = ["kind", "tier", "planId", "quantity"];

/**
 * Every invoice says what it is for (DESIGN §6.9, Stripe's `billing_reason`): its `intent`, in every
 * answer that carries an invoice (tenant and operator routes, the upcoming invoice, webhook payloads),
 * in one shape. Over real HTTP.
 */
describe.each(testDatabases())("an invoice's intent on $name", (database) => {
  let b: Billing;
  let http: Awaited<ReturnType<Billing["overHttp"]>>;
  let op: Headers;
  let receiver: Server;
  const delivered: { type: string; data: Record<string, any> }[] = [];
  beforeAll(async () => {
    b = await startBilling(database);
    http = await b.overHttp();
    op = b.as.operator();
    receiver = createServer((req, res) => {
      let body = "";
      req.on("data", (chunk: Buffer) => (body += chunk.toString()));
      req.on("end", () => {
        delivered.push(JSON.parse(body));
        res.writeHead(200).end("ok");
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
    const endpoint = await http.call("POST", "/operator/webhook-endpoints", { headers: op, body: { url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks`, events: ["invoice.paid"] } });
    expect(endpoint.status).toBe(201);
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => receiver?.close(() => resolve()));
    await b?.close();
  });

  const expectShape = (intent: Record<string, unknown>) => {
    for (const field of Object.keys(intent)) expect(INTENT_FIELDS, field).toContain(field);
  };

  it("an upgrade, a tier change and a seat change: the tier, plan and seats each makes true, on the tenant's and the operator's routes", async () => {
    const { platformId, owner, invoice, subscription } = await b.upgraded();
    expect(invoice.intent).toEqual({ kind: "upgrade", tier: "starter", planId: "plan_starter", quantity: 1 });
    const change = await http.call("POST", "/subscription/change-tier", { headers: { ...owner, "idempotency-key": crypto.randomUUID() }, body: { tier: "growth" } });
    expect(change.body.invoice.intent).toEqual({ kind: "change_tier", tier: "growth", planId: "plan_growth", quantity: 1 });
    const seats = await http.call("PATCH", `/subscriptions/${subscription.id}`, { headers: { ...op, "idempotency-key": crypto.randomUUID() }, body: { quantity: 3 } });
    expect(seats.status, JSON.stringify(seats.body)).toBe(200);

    const tenant = await http.call("GET", `/api/billing/invoices?platformId=${platformId}`, { headers: owner });
    const kinds = (tenant.body.data as { intent: Record<string, unknown> }[]).map((i) => i.intent);
    expect(kinds).toEqual([
      { kind: "seats", tier: "growth", planId: "plan_growth", quantity: 3 },
      { kind: "change_tier", tier: "growth", planId: "plan_growth", quantity: 1 },
      { kind: "upgrade", tier: "starter", planId: "plan_starter", quantity: 1 },
    ]);
    for (const intent of kinds) expectShape(intent);
    expect((await http.call("GET", `/invoices/${invoice.id}`, { headers: op })).body.intent).toEqual({ kind: "upgrade", tier: "starter", planId: "plan_starter", quantity: 1 });
    expect((await http.call("GET", `/api/billing/invoices/${change.body.invoice.id}`, { headers: owner })).body.intent.kind).toBe("change_tier");
  });

  it("a renewal names what it renews, and the upcoming invoice what the next renewal will", async () => {
    const { platformId, owner, subscription } = await b.upgraded("plan_growth");
    const upcoming = await http.call("GET", `/invoices/upcoming?platformId=${platformId}`, { headers: owner });
    expect(upcoming.body.intent).toEqual({ kind: "renewal", tier: "growth", planId: "plan_growth", quantity: 1 });
    b.clock.advance(subscription.currentPeriodEnd * 1000 - b.clock.now().getTime() + 60_000);
    await b.ctx.worker.pass();
    const [renewal] = (await http.call("GET", `/invoices?platformId=${platformId}`, { headers: owner })).body.data;
    expect(renewal).toMatchObject({ status: "paid", intent: { kind: "renewal", tier: "growth", planId: "plan_growth", quantity: 1 } });
  });

  it("an operator's generate is manual; an invoice stored before intents shows what it settles", async () => {
    const { platformId, subscription } = await b.upgraded();
    const customerId = subscription.customerId as string;
    expect((await http.call("POST", "/operator/debits", { headers: { ...op, "idempotency-key": crypto.randomUUID() }, body: { customerId, amount: 7, description: "Setup" } })).status).toBe(201);
    const generated = await http.call("POST", "/operator/invoices/generate", { headers: { ...op, "idempotency-key": crypto.randomUUID() }, body: { customerId } });
    expect(generated.status, JSON.stringify(generated.body)).toBe(201);
    expect(generated.body.intent).toEqual({ kind: "manual" });
    // an invoice finalized before intents were stored: what it settles, by its reason
    await b.db.update(invoices).set({ intent: null }).where(eq(invoices.id, generated.body.id));
    expect((await http.call("GET", `/invoices/${generated.body.id}?platformId=${platformId}`, { headers: op })).body.intent).toEqual({ kind: "manual" });
  });

  it("webhooks carry the invoice with its intent, in the same shape", async () => {
    const before = delivered.length;
    const { invoice } = await b.upgraded("plan_scale");
    await b.ctx.webhooks.pass();
    const paid = delivered.slice(before).find((e) => e.type === "invoice.paid" && e.data.id === invoice.id);
    expect(paid?.data.intent).toEqual({ kind: "upgrade", tier: "scale", planId: "plan_scale", quantity: 1 });
    expect(paid?.data).toEqual(expect.objectContaining({ id: invoice.id, lines: expect.any(Array) }));
  });
});
