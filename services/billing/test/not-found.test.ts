import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabases } from "@core/storage";
import { startBilling, type Answer, type Billing, type Headers } from "./support/billing.js";

/**
 * A 404 names nothing the caller does not own (DESIGN §6.9, docs/vault/cross-cutting/security.md):
 * asking for another tenant's invoice, platform, customer, subscription or card answers exactly as
 * asking for one that never existed, and the answer repeats none of the other tenant's ids. Over
 * real HTTP.
 */
describe.each(testDatabases())("404s that name nothing of another tenant on $name", (database) => {
  let b: Billing;
  let http: Awaited<ReturnType<Billing["overHttp"]>>;
  let mine: Headers;
  /** the other tenant's ids */
  let theirs: { platformId: string; invoiceId: string; customerId: string; subscriptionId: string; cardId: string };
  beforeAll(async () => {
    b = await startBilling(database);
    http = await b.overHttp();
    mine = (await b.upgraded()).owner;
    const other = await b.upgraded();
    const cards = await http.call("GET", "/api/billing/payment-methods", { headers: other.owner });
    theirs = { platformId: other.platformId, invoiceId: other.invoice.id, customerId: other.subscription.customerId, subscriptionId: other.subscription.id, cardId: cards.body.data[0].id };
  });
  afterAll(() => b?.close());

  const expectNamesNothing = (answer: Answer, what: string) => {
    expect(answer.status, `${what}: ${JSON.stringify(answer.body)}`).toBe(404);
    const text = typeof answer.body === "string" ? answer.body : JSON.stringify(answer.body);
    for (const id of Object.values(theirs)) expect(text, what).not.toContain(id);
  };

  it("another tenant's invoice, by itself and under any prefix, page or form: as unknown as a made-up one", async () => {
    const made = "in_doesnotexist0000000";
    for (const suffix of ["", "/credit-notes", "/html", "/pdf"]) {
      for (const prefix of ["", "/api/billing"]) {
        const foreign = await http.call("GET", `${prefix}/invoices/${theirs.invoiceId}${suffix}`, { headers: mine });
        expectNamesNothing(foreign, `${prefix}/invoices/{theirs}${suffix}`);
        const unknown = await http.call("GET", `${prefix}/invoices/${made}${suffix}`, { headers: mine });
        expect(unknown.status).toBe(404);
        if (suffix === "" || suffix === "/credit-notes") expect(foreign.body.error.message).toBe(unknown.body.error.message);
        expect(JSON.stringify(unknown.body)).not.toContain(made);
      }
    }
  });

  it("another tenant's platform, named with platformId, on reads and writes", async () => {
    const q = `platformId=${theirs.platformId}`;
    for (const [method, path, body] of [
      ["GET", `/invoices?${q}`],
      ["GET", `/invoices/upcoming?${q}`],
      ["GET", `/invoices/${theirs.invoiceId}?${q}`],
      ["GET", `/api/billing/subscription?${q}`],
      ["GET", `/api/billing/customer?${q}`],
      ["PATCH", `/api/billing/customer?${q}`, { name: "Mine now" }],
      ["GET", `/usage/current?${q}`],
      ["GET", `/platforms/${theirs.platformId}/stacks/stk_any/usage`],
      ["POST", `/subscription/change-tier?${q}`, { tier: "growth" }],
      ["POST", `/subscription/cancel?${q}`, {}],
      ["GET", `/api/billing/payment-methods?${q}`],
    ] as [string, string, unknown?][]) {
      expectNamesNothing(await http.call(method, path, { headers: { ...mine, "idempotency-key": crypto.randomUUID() }, body }), `${method} ${path}`);
    }
  });

  it("another tenant's card: removing it or making it the default", async () => {
    for (const prefix of ["", "/api/billing"]) {
      expectNamesNothing(await http.call("DELETE", `${prefix}/payment-methods/${theirs.cardId}`, { headers: mine }), "DELETE their card");
      expectNamesNothing(await http.call("POST", `${prefix}/payment-methods/${theirs.cardId}/default`, { headers: { ...mine, "idempotency-key": crypto.randomUUID() } }), "their card as default");
    }
  });

  it("the operators' routes name no id they were not given either: unknown customers, subscriptions, invoices and cards answer by kind", async () => {
    const op = b.as.operator();
    const made = "zz_madeup0000000000";
    for (const [method, path, body] of [
      ["GET", `/customers/${made}`],
      ["PATCH", `/customers/${made}`, { name: "X" }],
      ["GET", `/customers/${made}/subscriptions`],
      ["GET", `/subscriptions/${made}`],
      ["PATCH", `/subscriptions/${made}`, { quantity: 2 }],
      ["DELETE", `/subscriptions/${made}`],
      ["POST", `/operator/invoices/${made}/void`, {}],
      ["POST", `/operator/invoices/${made}/pay`, {}],
      ["POST", `/operator/invoices/${made}/credit-notes`, { amountCents: 100, reason: "duplicate", refundTo: "balance" }],
      ["POST", `/operator/credits`, { customerId: made, amount: 1, description: "x" }],
      ["POST", `/operator/subscriptions/${made}/trial`, { trialDays: 3 }],
      ["GET", `/invoices?platformId=${made}`],
      ["POST", `/payment-methods/${made}/detach`, {}],
    ] as [string, string, unknown?][]) {
      const r = await http.call(method, path, { headers: { ...op, "idempotency-key": crypto.randomUUID() }, body });
      expect(r.status, `${method} ${path}: ${JSON.stringify(r.body)}`).toBe(404);
      expect(r.body.error.message, `${method} ${path}`).toMatch(/^No such /);
      expect(JSON.stringify(r.body), `${method} ${path}`).not.toContain(made);
    }
    // an operator paying a real invoice with another customer's card: the card is unknown to that invoice
    const { invoice } = await b.upgraded();
    const pay = await http.call("POST", `/operator/invoices/${invoice.id}/pay`, { headers: { ...op, "idempotency-key": crypto.randomUUID() }, body: { paymentMethodId: theirs.cardId } });
    expectNamesNothing(pay, "pay with another customer's card");
  });
});
