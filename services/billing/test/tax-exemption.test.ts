import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabases } from "@core/storage";
import { TaxRates } from "../src/tax.js";
import { startBilling, type Billing, type Headers } from "./support/billing.js";

const berlin = { line1: "Musterstraße 5", city: "Berlin", postalCode: "10115", country: "DE" };

/**
 * Tax exemption is the seller's call (docs/vault/concepts/invoices-and-tax.md, Stripe keeps
 * `tax_exempt` the merchant's): a tenant who sets `exempt` on its own customer would make every later
 * invoice carry no tax that the seller still owes. The tenant records a request with a note instead;
 * the operators' customer list shows it, and an operator settles it. Over real HTTP.
 */
describe.each(testDatabases())("tax exemption is the seller's call on $name", (database) => {
  let b: Billing;
  let http: Awaited<ReturnType<Billing["overHttp"]>>;
  let op: Headers;
  beforeAll(async () => {
    b = await startBilling(database, { taxRates: TaxRates.load('{ "default": 0, "DE": 19 }', "0", false) });
    http = await b.overHttp();
    op = b.as.operator();
  });
  afterAll(() => b?.close());

  /** A German platform with billing details, its owner's headers and its customer. */
  async function germanPlatform() {
    const platformId = await b.newPlatform();
    const owner = b.as.owner(platformId);
    const made = await http.call("PATCH", "/api/billing/customer", { headers: owner, body: { name: "Hilfswerk e.V.", address: berlin } });
    expect(made.status, JSON.stringify(made.body)).toBe(200);
    return { platformId, owner, customer: made.body };
  }

  const upgrade = (owner: Headers) =>
    http.call("POST", "/api/billing/upgrade", { headers: owner, body: { planId: "plan_starter", paymentMethodId: "pm_card_visa", billingEmail: "billing@example.com", idempotencyKey: crypto.randomUUID() } });

  it("refuses a tenant's taxExempt exempt with 403 in the envelope, and its invoices stay taxed", async () => {
    const { owner } = await germanPlatform();
    for (const path of ["/api/billing/customer", "/customer"]) {
      const asked = await http.call("PATCH", path, { headers: owner, body: { taxExempt: "exempt" } });
      expect(asked.status, JSON.stringify(asked.body)).toBe(403);
      expect(asked.body.error).toMatchObject({ code: "FORBIDDEN", details: null });
      expect(asked.body.error.message).toContain("taxExemptionRequested");
      expect(asked.body.error.requestId).toEqual(expect.any(String));
    }
    // nothing of a refused change is kept, not even its other fields
    const mixed = await http.call("PATCH", "/api/billing/customer", { headers: owner, body: { name: "Renamed", taxExempt: "exempt" } });
    expect(mixed.status).toBe(403);
    const customer = (await http.call("GET", "/api/billing/customer", { headers: owner })).body;
    expect(customer).toMatchObject({ name: "Hilfswerk e.V.", taxExempt: "none", taxExemptionRequested: null });
    const up = await upgrade(owner);
    expect(up.body.invoice).toMatchObject({ taxTreatment: "standard", taxRatePercent: "19", taxCents: 551, customerSnapshot: { taxExempt: "none" } });
  });

  it("records a tenant's request with its note, which the operators' list shows and filters on", async () => {
    const { platformId, owner, customer } = await germanPlatform();
    const other = await germanPlatform();
    const asked = await http.call("PATCH", "/api/billing/customer", { headers: owner, body: { taxExemptionRequested: { note: "  Registered charity, VR 12345 B  " } } });
    expect(asked.status, JSON.stringify(asked.body)).toBe(200);
    expect(asked.body).toMatchObject({ taxExempt: "none", taxExemptionRequested: { note: "Registered charity, VR 12345 B", requestedAt: expect.any(Number) } });
    // asking does not exempt anything
    expect((await upgrade(owner)).body.invoice).toMatchObject({ taxTreatment: "standard", taxCents: 551 });

    const listed = await http.call("GET", "/customers?taxExemptionRequested=true&limit=100", { headers: op });
    expect(listed.status).toBe(200);
    const ids = (listed.body.data as { id: string }[]).map((c) => c.id);
    expect(ids).toContain(customer.id);
    expect(ids).not.toContain(other.customer.id);
    expect(listed.body.data.find((c: { id: string }) => c.id === customer.id)).toMatchObject({ platformId, taxExemptionRequested: { note: "Registered charity, VR 12345 B" } });
    const notAsked = await http.call("GET", "/customers?taxExemptionRequested=false&limit=100", { headers: op });
    expect((notAsked.body.data as { id: string }[]).map((c) => c.id)).not.toContain(customer.id);
    expect((await http.call("GET", "/customers?taxExemptionRequested=maybe", { headers: op })).status).toBe(400);

    // the tenant may withdraw it
    const withdrawn = await http.call("PATCH", "/api/billing/customer", { headers: owner, body: { taxExemptionRequested: null } });
    expect(withdrawn.body.taxExemptionRequested).toBeNull();
  });

  it("bounds the note and refuses control characters, as every buyer detail", async () => {
    const { owner } = await germanPlatform();
    for (const note of ["", "   ", "N".repeat(501), "line one\nline two", "tab\there", "bell\u0007"]) {
      const r = await http.call("PATCH", "/api/billing/customer", { headers: owner, body: { taxExemptionRequested: { note } } });
      expect(r.status, JSON.stringify(note)).toBe(400);
      expect(r.body.error.code).toBe("VALIDATION_ERROR");
      expect(r.body.error.details.map((d: { path: string }) => d.path)).toContain("taxExemptionRequested.note");
    }
    expect((await http.call("PATCH", "/api/billing/customer", { headers: owner, body: { taxExemptionRequested: { note: "N".repeat(500) } } })).status).toBe(200);
    expect((await http.call("PATCH", "/api/billing/customer", { headers: owner, body: { taxExemptionRequested: { note: "x", extra: 1 } } })).status).toBe(400);
  });

  it("an operator settles the request by setting taxExempt: granted, invoices carry no tax and the tenant keeps it", async () => {
    const { owner, customer } = await germanPlatform();
    await http.call("PATCH", "/api/billing/customer", { headers: owner, body: { taxExemptionRequested: { note: "Charity" } } });
    const granted = await http.call("PATCH", `/customers/${customer.id}`, { headers: op, body: { taxExempt: "exempt" } });
    expect(granted.status, JSON.stringify(granted.body)).toBe(200);
    expect(granted.body).toMatchObject({ taxExempt: "exempt", taxExemptionRequested: null });
    expect((await upgrade(owner)).body.invoice).toMatchObject({ taxTreatment: "exempt", taxCents: 0, totalCents: 2900 });
    // an exempt customer stays so: its own details change freely, the exemption with them
    const renamed = await http.call("PATCH", "/api/billing/customer", { headers: owner, body: { name: "Hilfswerk Berlin e.V.", taxExempt: "exempt" } });
    expect(renamed.status, JSON.stringify(renamed.body)).toBe(200);
    expect(renamed.body).toMatchObject({ name: "Hilfswerk Berlin e.V.", taxExempt: "exempt" });
    // asking again while exempt is a conflict, not a new request
    const again = await http.call("PATCH", "/api/billing/customer", { headers: owner, body: { taxExemptionRequested: { note: "Again" } } });
    expect(again.status).toBe(409);
    // the decision is in the operator audit, before and after
    const audit = await http.call("GET", `/operator/audit?limit=100`, { headers: op });
    const entry = (audit.body.data as { action: string; targetId: string; before: any; after: any }[]).find((e) => e.targetId === customer.id && e.after?.taxExempt === "exempt" && e.before?.taxExempt === "none");
    expect(entry?.before.taxExemptionRequested).toMatchObject({ note: "Charity" });
  });

  it("an operator's other answer declines it: the request is cleared, the customer stays taxed", async () => {
    const { owner, customer } = await germanPlatform();
    await http.call("PATCH", "/api/billing/customer", { headers: owner, body: { taxExemptionRequested: { note: "Charity" } } });
    const declined = await http.call("PATCH", `/customers/${customer.id}`, { headers: op, body: { taxExempt: "none" } });
    expect(declined.body).toMatchObject({ taxExempt: "none", taxExemptionRequested: null });
    await http.call("PATCH", "/api/billing/customer", { headers: owner, body: { taxExemptionRequested: { note: "Charity, with papers" } } });
    const dismissed = await http.call("PATCH", `/customers/${customer.id}`, { headers: op, body: { taxExemptionRequested: null } });
    expect(dismissed.body).toMatchObject({ taxExempt: "none", taxExemptionRequested: null });
    // an operator answers requests; it does not make them
    expect((await http.call("PATCH", `/customers/${customer.id}`, { headers: op, body: { taxExemptionRequested: { note: "x" } } })).status).toBe(400);
  });

  it("reverse stays the tenant's to claim, checked as before", async () => {
    const platformId = await b.newPlatform();
    const owner = b.as.owner(platformId);
    const paris = { line1: "12 rue de la Paix", city: "Paris", postalCode: "75002", country: "FR" };
    const ok = await http.call("PATCH", "/api/billing/customer", { headers: owner, body: { name: "Dupont SARL", address: paris, taxIds: [{ type: "eu_vat", value: "FR40303265045" }], taxExempt: "reverse" } });
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    expect(ok.body.taxExempt).toBe("reverse");
    expect((await http.call("PATCH", "/api/billing/customer", { headers: owner, body: { address: berlin } })).status).toBe(400);
  });

  describe("the portal's billing details form", () => {
    async function portalOf(owner: Headers) {
      const r = await http.call("POST", "/portal", { headers: owner, body: { returnUrl: "https://example.com/back" } });
      expect(r.status).toBe(201);
      return new URL(r.body.url).pathname;
    }
    const post = (path: string, fields: Record<string, string>) =>
      fetch(`${http.url}${path}/details`, { method: "POST", redirect: "manual", headers: { "content-type": "application/x-www-form-urlencoded" }, body: new URLSearchParams(fields).toString() });
    const fieldsOf = (more: Record<string, string>) => ({ name: "Hilfswerk e.V.", email: "billing@example.com", line1: berlin.line1, line2: "", city: berlin.city, postalCode: berlin.postalCode, state: "", country: "DE", taxExempt: "none", ...more });

    it("offers no exempt choice, refuses a posted exempt with 403, and records a request instead", async () => {
      const { owner } = await germanPlatform();
      const base = await portalOf(owner);
      const page = await (await fetch(`${http.url}${base}/details`)).text();
      expect(page).not.toContain('value="exempt"');
      expect(page).toContain('name="taxExemptionNote"');

      const forged = await post(base, fieldsOf({ taxExempt: "exempt" }));
      expect(forged.status).toBe(403);
      expect(await forged.text()).toContain("Only the seller");
      expect((await http.call("GET", "/api/billing/customer", { headers: owner })).body.taxExempt).toBe("none");

      const requested = await post(base, fieldsOf({ taxExemptionRequested: "on", taxExemptionNote: "Registered charity VR 12345 B" }));
      expect(requested.status).toBe(303);
      expect((await http.call("GET", "/api/billing/customer", { headers: owner })).body.taxExemptionRequested).toMatchObject({ note: "Registered charity VR 12345 B" });
      const shown = await (await fetch(`${http.url}${base}/details`)).text();
      expect(shown).toContain("Registered charity VR 12345 B");
      expect(shown).toContain("asked for");

      const badNote = await post(base, fieldsOf({ taxExemptionRequested: "on", taxExemptionNote: "" }));
      expect(badNote.status).toBe(400);
      // unticking the box withdraws it
      expect((await post(base, fieldsOf({}))).status).toBe(303);
      expect((await http.call("GET", "/api/billing/customer", { headers: owner })).body.taxExemptionRequested).toBeNull();
    });

    it("shows an exempt customer that the seller made it so, and keeps it exempt through a save", async () => {
      const { owner, customer } = await germanPlatform();
      await http.call("PATCH", `/customers/${customer.id}`, { headers: op, body: { taxExempt: "exempt" } });
      const base = await portalOf(owner);
      const page = await (await fetch(`${http.url}${base}/details`)).text();
      expect(page).toContain("tax exempt");
      expect(page).not.toContain('name="taxExempt"');
      const { taxExempt: _, ...fields } = fieldsOf({ name: "Hilfswerk Berlin e.V." });
      expect((await post(base, fields)).status).toBe(303);
      expect((await http.call("GET", "/api/billing/customer", { headers: owner })).body).toMatchObject({ name: "Hilfswerk Berlin e.V.", taxExempt: "exempt" });
    });
  });
});
