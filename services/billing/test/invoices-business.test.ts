import { createRequire } from "node:module";
import { dirname } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getDocument } from "pdfjs-dist/legacy/build/pdf.mjs";
import { testDatabases } from "@core/storage";
import { principal } from "../../../packages/service-auth/test/support/fake-iam.js";
import { TaxRates } from "../src/tax.js";
import { startBilling, TEST_SELLER, unique, type Billing, type Headers } from "./support/billing.js";

// pdfjs-dist 6 expects Node 22's Promise.withResolvers; Node 20 lacks it
(Promise as unknown as { withResolvers?: unknown }).withResolvers ??= function withResolvers<T>() {
  let resolve!: (value: T) => void;
  let reject!: (reason: unknown) => void;
  const promise = new Promise<T>((yes, no) => {
    resolve = yes;
    reject = no;
  });
  return { promise, resolve, reject };
};

const RATES = '{ "default": 0, "DE": 19, "FR": 20, "US-CA": 7.25 }';

const berlin = { line1: "Musterstraße 5", line2: "Hinterhaus", city: "Berlin", postalCode: "10115", state: null, country: "DE" };
const paris = { line1: "12 rue de la Paix", city: "Paris", postalCode: "75002", country: "FR" };

const STANDARD_FONTS = `${dirname(createRequire(import.meta.url).resolve("pdfjs-dist/package.json"))}/standard_fonts/`;

/** The text of every page of a PDF, read back with pdfjs (what a reader of the file sees). */
async function pdfText(bytes: Uint8Array): Promise<string> {
  const task = getDocument({ data: bytes, standardFontDataUrl: STANDARD_FONTS });
  const pdf = await task.promise;
  const pages: string[] = [];
  for (let n = 1; n <= pdf.numPages; n++) {
    const content = await (await pdf.getPage(n)).getTextContent();
    pages.push(content.items.map((item) => ("str" in item ? item.str : "")).join(" "));
  }
  await task.destroy();
  return pages.join("\n").replace(/\s+/g, " ");
}

/** An IAM session cookie for the session a bearer header names (better-auth's `token.signature`). */
const cookieOf = (headers: Headers): Headers => ({ cookie: `better-auth.session_token=${encodeURIComponent(`${headers.authorization!.slice("Bearer ".length)}.c2lnbmF0dXJl`)}` });

describe.each(testDatabases())("invoices a business can file on $name (DESIGN §6.11)", (database) => {
  let b: Billing;
  beforeAll(async () => {
    b = await startBilling(database, { taxRates: TaxRates.load(RATES, "0", false) });
  });
  afterAll(() => b?.close());

  /** A platform whose owner set its billing details (and an operator what only the seller sets), then upgraded to starter. */
  async function billed(details: Record<string, unknown>, bySeller: Record<string, unknown> = {}) {
    const platformId = await b.newPlatform();
    const owner = b.as.owner(platformId);
    const set = await b.call("PATCH", "/api/billing/customer", { headers: owner, body: details });
    expect(set.status, JSON.stringify(set.body)).toBe(200);
    if (Object.keys(bySeller).length > 0) expect((await b.call("PATCH", `/customers/${set.body.id}`, { headers: b.as.operator(), body: bySeller })).status).toBe(200);
    const up = await b.call("POST", "/api/billing/upgrade", { headers: owner, body: { planId: "plan_starter", paymentMethodId: "pm_card_visa", billingEmail: "billing@example.com", idempotencyKey: crypto.randomUUID() } });
    expect(up.status, JSON.stringify(up.body)).toBe(200);
    return { platformId, owner, customer: set.body, invoice: up.body.invoice };
  }

  it("names the buyer from the start: the platform's name (its organization's) until billing details give another", async () => {
    const { platformId, owner, invoice } = await b.upgraded();
    const platformName = ((await b.platformOf(platformId)) as unknown as { name: string }).name;
    expect(platformName).toMatch(/^Platform /);
    expect(invoice.customerSnapshot).toMatchObject({ email: "billing@example.com", name: platformName });
    const customer = await b.call("GET", "/api/billing/customer", { headers: owner });
    expect(customer.body.name).toBe(platformName);
    // a name the tenant gives wins, and the next invoice carries it
    expect((await b.call("PATCH", "/api/billing/customer", { headers: owner, body: { name: "Lin Labs GmbH" } })).status).toBe(200);
    expect((await b.call("GET", "/api/billing/customer", { headers: owner })).body.name).toBe("Lin Labs GmbH");
  });

  it("a German customer's invoice: seller, buyer with address and VAT id, 19% on the stated base, quantity and unit price on each line", async () => {
    const { platformId, owner, invoice } = await billed({ name: "Müller Software GmbH", address: berlin, taxIds: [{ type: "eu_vat", value: "DE 811 907 980" }] });
    expect(invoice).toMatchObject({
      status: "paid",
      subtotalCents: 2900,
      taxBaseCents: 2900,
      taxRatePercent: "19",
      taxTreatment: "standard",
      taxCents: 551,
      totalCents: 3451,
      amountPaidCents: 3451,
      seller: TEST_SELLER,
      customerSnapshot: { email: "billing@example.com", name: "Müller Software GmbH", address: berlin, taxIds: [{ type: "eu_vat", value: "DE 811 907 980" }], taxExempt: "none" },
      lines: [expect.objectContaining({ kind: "subscription", quantity: "1", unitAmountCents: "2900", amountCents: 2900, taxRatePercent: "19" })],
    });
    // the invoice keeps the buyer as it was: a later change names the next invoice only
    await b.call("PATCH", "/api/billing/customer", { headers: owner, body: { name: "Müller Cloud AG" } });
    const again = await b.call("GET", `/invoices/${invoice.id}`, { headers: owner });
    expect(again.body.customerSnapshot.name).toBe("Müller Software GmbH");
    // the upcoming invoice is priced by the same rules
    const upcoming = await b.call("GET", `/invoices/upcoming?platformId=${platformId}`, { headers: owner });
    expect(upcoming.body).toMatchObject({ taxRatePercent: "19", taxBaseCents: 2900, taxCents: 551, amountDueCents: 3451, customerSnapshot: { name: "Müller Cloud AG" }, seller: TEST_SELLER });
    // and so is the proration preview of an upgrade
    const preview = await b.call("GET", `/subscription/proration-preview?platformId=${platformId}&tier=growth`, { headers: owner });
    expect(preview.status, JSON.stringify(preview.body)).toBe(200);
    expect(preview.body.subtotalCents).toBeGreaterThan(0);
    expect(preview.body.taxCents).toBe(Math.floor((preview.body.subtotalCents * 19 + 50) / 100));
    const html = await b.call("GET", `/invoices/${invoice.id}/html`, { headers: owner });
    expect(html.status).toBe(200);
    for (const text of ["Core Cloud GmbH", "Friedrichstraße 1", "VAT ID: DE123456789", "Müller Software GmbH", "Musterstraße 5", "10115 Berlin", "Germany", "VAT: DE 811 907 980", invoice.number, "Starter (monthly)", "19%", "$29.00", "Tax (19% of $29.00)", "$5.51", "$34.51"]) {
      expect(html.body).toContain(text);
    }
    expect(html.body).not.toContain("Reverse charge");
  });

  it("a reverse-charge customer's invoice: an EU business in another EU country pays no tax, and the invoice says Reverse charge", async () => {
    const { owner, invoice } = await billed({ name: "Dupont SARL", address: paris, taxIds: [{ type: "eu_vat", value: "FR40303265045" }], taxExempt: "reverse" });
    expect(invoice).toMatchObject({ taxTreatment: "reverse", taxRatePercent: "0", taxBaseCents: 2900, taxCents: 0, totalCents: 2900, customerSnapshot: { taxExempt: "reverse" } });
    const html = await b.call("GET", `/invoices/${invoice.id}/html`, { headers: owner });
    expect(html.body).toContain("Reverse charge");
    expect(html.body).toContain("Tax (reverse charge)");

    const pdf = await b.app.request(`/api/billing/invoices/${invoice.id}/pdf`, { headers: owner });
    expect(pdf.status).toBe(200);
    expect(pdf.headers.get("content-type")).toBe("application/pdf");
    const text = await pdfText(new Uint8Array(await pdf.arrayBuffer()));
    for (const expected of ["Core Cloud GmbH", "VAT ID: DE123456789", "Dupont SARL", "12 rue de la Paix", "75002 Paris", "France", "VAT: FR40303265045", `Invoice ${invoice.number}`, "Starter (monthly)", "$29.00", "Tax (reverse charge)", "Reverse charge: VAT is to be accounted for by the recipient", "Amount paid"]) {
      expect(text).toContain(expected);
    }
  });

  it("the PDF is the HTML page's content: lines with quantity, unit price, tax rate and amount, the tax base and the tax", async () => {
    const { owner, invoice } = await billed({ name: "Müller Software GmbH", address: berlin });
    const pdf = await b.app.request(`/invoices/${invoice.id}/pdf`, { headers: owner });
    const text = await pdfText(new Uint8Array(await pdf.arrayBuffer()));
    for (const expected of ["Invoice number", invoice.number, "Müller Software GmbH", "Musterstraße 5", "Description Qty Unit price Tax Amount", "Starter (monthly)", "1 $29.00 19% $29.00", "Subtotal $29.00", "Tax base $29.00", "Tax (19% of $29.00) $5.51", "Total $34.51", "Amount due $34.51"]) {
      expect(text).toContain(expected);
    }
    // another tenant's invoice is not found, as GET /invoices/{id}
    const stranger = b.as.owner(await b.newPlatform());
    expect((await b.app.request(`/invoices/${invoice.id}/pdf`, { headers: stranger })).status).toBe(404);
    expect((await b.app.request(`/invoices/${invoice.id}/pdf`)).status).toBe(401);
  });

  it("an exempt customer pays no tax; a Californian pays the state's rate", async () => {
    const exempt = await billed({ name: "Hilfswerk e.V.", address: berlin }, { taxExempt: "exempt" });
    expect(exempt.invoice).toMatchObject({ taxTreatment: "exempt", taxCents: 0, totalCents: 2900 });
    const californian = await billed({ address: { line1: "1 Market St", city: "San Francisco", postalCode: "94105", state: "ca", country: "us" } });
    // 2900 × 7.25% = 210.25 → 210
    expect(californian.invoice).toMatchObject({ taxTreatment: "standard", taxRatePercent: "7.25", taxCents: 210, totalCents: 3110, customerSnapshot: { address: { state: "CA", country: "US" } } });
  });

  it("refuses reverse charge where it does not apply, with a clear message", async () => {
    const platformId = await b.newPlatform();
    const owner = b.as.owner(platformId);
    const refuse = async (body: Record<string, unknown>, message: RegExp) => {
      const r = await b.call("PATCH", "/api/billing/customer", { headers: owner, body });
      expect(r.status).toBe(400);
      expect(r.body.error.code).toBe("BAD_REQUEST");
      expect(r.body.error.message).toMatch(message);
    };
    await refuse({ address: berlin, taxIds: [{ type: "eu_vat", value: "DE811907980" }], taxExempt: "reverse" }, /the seller is in Germany too/);
    await refuse({ address: paris, taxExempt: "reverse" }, /EU VAT id of France/);
    await refuse({ address: { ...paris, country: "US" }, taxIds: [{ type: "eu_vat", value: "FR40303265045" }], taxExempt: "reverse" }, /business in an EU country/);
    const ok = await b.call("PATCH", "/api/billing/customer", { headers: owner, body: { address: paris, taxIds: [{ type: "eu_vat", value: "FR40303265045" }], taxExempt: "reverse" } });
    expect(ok.status).toBe(200);
    // removing the VAT id while reverse stays breaks it: refused the same way
    await refuse({ taxIds: [] }, /EU VAT id of France/);
    expect((await b.call("PATCH", "/api/billing/customer", { headers: owner, body: { taxIds: [], taxExempt: "none" } })).status).toBe(200);
  });

  it("checks buyer details at their limits, just inside and just outside", async () => {
    const platformId = await b.newPlatform();
    const owner = b.as.owner(platformId);
    const patch = (body: Record<string, unknown>) => b.call("PATCH", "/customer", { headers: owner, body });
    const ids = (n: number) => Array.from({ length: n }, (_, i) => ({ type: "us_ein", value: `12-345678${i}` }));
    const inside = await patch({ name: "N".repeat(200), address: { line1: "L".repeat(200), line2: "M".repeat(200), city: "C".repeat(100), postalCode: "P".repeat(20), state: "ABC", country: "de" }, taxIds: ids(5) });
    expect(inside.status, JSON.stringify(inside.body)).toBe(200);
    expect(inside.body).toMatchObject({ name: "N".repeat(200), address: { country: "DE", state: "ABC" }, taxIds: ids(5), taxExempt: "none" });
    const outside: [Record<string, unknown>, string][] = [
      [{ name: "N".repeat(201) }, "name"],
      [{ name: "" }, "name"],
      [{ name: "Evil\u0007Corp" }, "name"],
      [{ address: { ...berlin, line1: "L".repeat(201) } }, "address.line1"],
      [{ address: { ...berlin, line1: "Line\nbreak" } }, "address.line1"],
      [{ address: { ...berlin, city: "C".repeat(101) } }, "address.city"],
      [{ address: { ...berlin, postalCode: "P".repeat(21) } }, "address.postalCode"],
      [{ address: { ...berlin, state: "ABCD" } }, "address.state"],
      [{ address: { ...berlin, country: "XX" } }, "address.country"],
      [{ address: { ...berlin, country: "Germany" } }, "address.country"],
      [{ address: { city: "Berlin", country: "DE" } }, "address.line1"],
      [{ taxIds: ids(6) }, "taxIds"],
      [{ taxIds: [{ type: "eu_vat", value: "DE12345" }] }, "taxIds.0.value"],
      [{ taxIds: [{ type: "xx_vat", value: "1" }] }, "taxIds.0.type"],
      [{ taxIds: [{ type: "us_ein", value: "12-3456789" }, { type: "us_ein", value: "12-3456789" }] }, "taxIds"],
      [{ taxExempt: "partly" }, "taxExempt"],
      [{ metadata: { a: 1 } }, "metadata"],
    ];
    for (const [body, path] of outside) {
      const r = await patch(body);
      expect(r.status, JSON.stringify(body).slice(0, 80)).toBe(400);
      expect(r.body.error.details.map((d: { path: string }) => d.path)).toContain(path);
    }
    // nothing of the refused changes was kept
    expect((await b.call("GET", "/api/billing/customer", { headers: b.as.member(platformId) })).body.name).toBe("N".repeat(200));
  });

  it("GET /api/billing/customer needs billing:read and a customer; PATCH needs billing:manage; operators change any customer's details", async () => {
    const platformId = await b.newPlatform();
    expect((await b.call("GET", "/api/billing/customer", { headers: b.as.member(platformId) })).status).toBe(404);
    expect((await b.call("PATCH", "/api/billing/customer", { headers: b.as.member(platformId), body: { name: "X" } })).status).toBe(403);
    expect((await b.call("GET", "/api/billing/customer", { headers: b.as.owner(await b.newPlatform()) })).status).toBe(404);
    const made = await b.call("PATCH", "/api/billing/customer", { headers: b.as.owner(platformId), body: { name: "Acme Inc." } });
    expect(made.status).toBe(200);
    expect(made.body).toMatchObject({ platformId, name: "Acme Inc.", taxIds: [], taxExempt: "none", address: null });
    const op = await b.call("PATCH", `/customers/${made.body.id}`, { headers: b.as.operator(), body: { name: "Acme Incorporated", address: paris, taxIds: [{ type: "eu_vat", value: "FR40303265045" }], taxExempt: "reverse" } });
    expect(op.status, JSON.stringify(op.body)).toBe(200);
    expect(op.body).toMatchObject({ name: "Acme Incorporated", address: { ...paris, line2: null, state: null }, taxExempt: "reverse" });
    expect((await b.call("PATCH", `/customers/${made.body.id}`, { headers: b.as.operator(), body: { taxExempt: "reverse", address: berlin } })).status).toBe(400);
    const audit = await b.call("GET", `/operator/audit?targetId=${made.body.id}`, { headers: b.as.operator() });
    expect(audit.status).toBe(200);
    // an operator names the platform; without a customer to bill, an operator's address never becomes one
    const other = await b.newPlatform();
    expect((await b.call("PATCH", `/api/billing/customer?platformId=${other}`, { headers: b.as.operator(), body: { name: "X" } })).body.error.code).toBe("NO_CUSTOMER");
  });

  describe("IAM's session cookie opens the invoice page and its PDF (DESIGN §6.11)", () => {
    it("a member who may read billing: 200; one who may not: 403 as for the API; no credential: a browser goes to sign-in, an API client gets 401", async () => {
      const { platformId, invoice } = await billed({ name: "Cookie GmbH", address: berlin });
      const member = b.as.member(platformId);
      const page = await b.app.request(`/invoices/${invoice.id}/html`, { headers: { ...cookieOf(member), accept: "text/html" } });
      expect(page.status).toBe(200);
      expect(await page.text()).toContain("Cookie GmbH");
      const pdf = await b.app.request(`/api/billing/invoices/${invoice.id}/pdf`, { headers: cookieOf(member) });
      expect(pdf.status).toBe(200);
      expect(pdf.headers.get("content-type")).toBe("application/pdf");

      const token = unique("session");
      b.iam.sessions.set(token, principal({ orgType: "tenant", platformId, role: "guest", permissions: ["platform:read"] }));
      const noBilling = await b.app.request(`/invoices/${invoice.id}/html`, { headers: { ...cookieOf({ authorization: `Bearer ${token}` }), accept: "text/html" } });
      expect(noBilling.status).toBe(403);
      const api = await b.app.request(`/invoices/${invoice.id}`, { headers: { authorization: `Bearer ${token}` } });
      expect(api.status).toBe(403);
      const strangers = await b.app.request(`/invoices/${invoice.id}/html`, { headers: cookieOf(b.as.member(await b.newPlatform())) });
      expect(strangers.status).toBe(404);

      const browser = await b.app.request(`/invoices/${invoice.id}/html?platformId=${platformId}`, { headers: { accept: "text/html,application/xhtml+xml" } });
      expect(browser.status).toBe(303);
      const location = new URL(browser.headers.get("location")!);
      expect(`${location.origin}${location.pathname}`).toBe(`${b.iam.url}/sign-in`);
      expect(location.searchParams.get("next")).toBe(`http://localhost:4200/invoices/${invoice.id}/html?platformId=${platformId}`);
      // an expired or unknown cookie is no credential: the browser signs in again
      expect((await b.app.request(`/invoices/${invoice.id}/pdf`, { headers: { cookie: "better-auth.session_token=unknown.sig", accept: "text/html" } })).status).toBe(303);
      expect((await b.app.request(`/invoices/${invoice.id}/html`)).status).toBe(401);
      expect((await b.app.request(`/invoices/${invoice.id}/pdf`, { headers: { accept: "application/pdf" } })).status).toBe(401);
      // the cookie never authorizes a write
      const write = await b.app.request("/api/billing/customer", { method: "PATCH", headers: { ...cookieOf(b.as.owner(platformId)), "content-type": "application/json" }, body: JSON.stringify({ name: "CSRF" }) });
      expect(write.status).toBe(401);
    });

    it("GET /portal/open: a member with billing:manage goes to a new portal session; without a session to sign-in; without billing:manage 403", async () => {
      const { platformId } = await billed({ name: "Portal GmbH" });
      const open = await b.app.request(`/portal/open?platformId=${platformId}`, { headers: { ...cookieOf(b.as.owner(platformId)), accept: "text/html" } });
      expect(open.status).toBe(303);
      const portal = open.headers.get("location")!;
      expect(portal).toMatch(/^http:\/\/localhost:4200\/portal\/[A-Za-z0-9_-]+$/);
      const page = await b.app.request(new URL(portal).pathname);
      expect(page.status).toBe(200);
      const signIn = await b.app.request(`/portal/open?platformId=${platformId}`, { headers: { accept: "text/html" } });
      expect(signIn.status).toBe(303);
      expect(signIn.headers.get("location")).toBe(`${b.iam.url}/sign-in?next=${encodeURIComponent(`http://localhost:4200/portal/open?platformId=${platformId}`)}`);
      expect((await b.app.request(`/portal/open?platformId=${platformId}`, { headers: cookieOf(b.as.member(platformId)) })).status).toBe(403);
    });
  });

  describe("the portal's billing details form", () => {
    async function portalOf(platformId: string, owner: Headers) {
      const r = await b.call("POST", `/portal`, { headers: owner, body: { returnUrl: "https://example.com/back" } });
      expect(r.status).toBe(201);
      return new URL(r.body.url).pathname;
    }
    const post = (path: string, fields: Record<string, string>, headers: Headers = {}) =>
      b.app.request(`${path}/details`, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded", ...headers }, body: new URLSearchParams(fields).toString() });

    it("shows the details, saves a valid form (POST/redirect/GET), and shows a refused one again with why", async () => {
      const { platformId, owner } = await billed({ name: "Form GmbH", address: berlin });
      const base = await portalOf(platformId, owner);
      const page = await b.app.request(`${base}/details`);
      expect(page.status).toBe(200);
      const body = await page.text();
      expect(body).toContain('value="Form GmbH"');
      expect(body).toContain('value="Musterstraße 5"');

      const fields = { name: "Dupont SARL", email: "compta@dupont.example", line1: "12 rue de la Paix", line2: "", city: "Paris", postalCode: "75002", state: "", country: "FR", taxIdType0: "eu_vat", taxIdValue0: "FR40303265045", taxExempt: "reverse" };
      const saved = await post(base, fields);
      expect(saved.status).toBe(303);
      expect(saved.headers.get("location")).toBe(`${base}/details?saved=1`);
      expect(await (await b.app.request(`${base}/details?saved=1`)).text()).toContain("Billing details saved");
      const customer = await b.call("GET", "/api/billing/customer", { headers: owner });
      expect(customer.body).toMatchObject({ name: "Dupont SARL", email: "compta@dupont.example", address: { ...paris, line2: null, state: null }, taxIds: [{ type: "eu_vat", value: "FR40303265045" }], taxExempt: "reverse" });

      const refused = await post(base, { ...fields, postalCode: "P".repeat(21) });
      expect(refused.status).toBe(400);
      const refusedText = await refused.text();
      expect(refusedText).toContain("Postal code:");
      expect(refusedText).toContain(`value="${"P".repeat(21)}"`);
      const notReverse = await post(base, { ...fields, country: "DE", line1: "Musterstraße 5", city: "Berlin", taxIdValue0: "DE811907980" });
      expect(notReverse.status).toBe(400);
      expect(await notReverse.text()).toContain("the seller is in Germany too");
      expect((await b.call("GET", "/api/billing/customer", { headers: owner })).body.address.country).toBe("FR");

      const foreign = await post(base, { ...fields, name: "Hijack" }, { origin: "https://evil.example" });
      expect(foreign.status).toBe(403);
      expect((await b.call("GET", "/api/billing/customer", { headers: owner })).body.name).toBe("Dupont SARL");
      expect((await b.app.request("/portal/ps_nonexistent/details")).status).toBe(404);
    });
  });
});

describe.each(testDatabases())("the tax base leaves out carried balances, end to end, on $name (DESIGN §6.11)", (database) => {
  let b: Billing;
  beforeAll(async () => {
    b = await startBilling(database, { taxRates: TaxRates.load(RATES, "0", false), testClock: true });
  });
  afterAll(() => b?.close());

  it("a renewal that collects a carried 31 cents taxes only the plan: base 2900, tax 551, subtotal 2931", async () => {
    const platformId = await b.newPlatform();
    const owner = b.as.owner(platformId);
    const op = b.as.operator();
    expect((await b.call("PATCH", "/api/billing/customer", { headers: owner, body: { name: "Carry GmbH", address: berlin } })).status).toBe(200);
    const up = await b.call("POST", "/api/billing/upgrade", { headers: owner, body: { planId: "plan_starter", paymentMethodId: "pm_card_visa", billingEmail: "billing@example.com", idempotencyKey: crypto.randomUUID() } });
    expect(up.body.invoice).toMatchObject({ totalCents: 3451 });
    const customerId = up.body.subscription.customerId;
    // a credit that leaves 31 cents of the next renewal: under the minimum charge, carried on as a debit
    expect((await b.call("POST", "/operator/credits", { headers: { ...op, "idempotency-key": crypto.randomUUID() }, body: { customerId, amount: "34.20", description: "Goodwill" } })).status).toBe(201);
    const advanceTo = async (end: number) => {
      const now = (await b.call("GET", "/operator/test-clock", { headers: op })).body.now as number;
      expect((await b.call("POST", "/operator/test-clock/advance", { headers: op, body: { seconds: end - now + 60 } })).status).toBe(200);
    };
    await advanceTo(up.body.subscription.currentPeriodEnd);
    const second = (await b.call("GET", `/subscription?platformId=${platformId}`, { headers: owner })).body;
    await advanceTo(second.currentPeriodEnd);
    const invoices = (await b.call("GET", `/invoices?platformId=${platformId}`, { headers: owner })).body.data as Record<string, any>[];
    const [third, renewal] = invoices;
    expect(renewal).toMatchObject({ totalCents: 3451, creditAppliedCents: 3420, amountDueCents: 31 });
    expect(third).toMatchObject({ status: "paid", subtotalCents: 2931, taxBaseCents: 2900, taxRatePercent: "19", taxCents: 551, totalCents: 3482 });
    expect(third!.lines.map((l: any) => [l.kind, l.amountCents, l.taxRatePercent])).toEqual([
      ["subscription", 2900, "19"],
      ["carried", 31, null],
    ]);
    const html = await b.call("GET", `/invoices/${third!.id}/html`, { headers: owner });
    expect(html.body).toContain("Tax base (subtotal without carried balance)");
    expect(html.body).toContain("Tax (19% of $29.00)");
    expect(html.body).toContain("outside this invoice&#39;s tax base");
  });
});
