import { randomUUID } from "node:crypto";
import type { Page } from "playwright-core";
import { and, eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listen, type RunningServer } from "@core/kit";
import { testDatabases } from "@core/storage";
import { Browsers, hasChromium, look, requireBrowserOrSkip } from "../../../test/support/chromium.js";
import { charges } from "../src/db/schema.js";
import { formatMoney, formatQuantity } from "../src/money.js";
import { startBilling, type Billing } from "./support/billing.js";

/**
 * The portal explains where the customer stands (DESIGN §6.1, §6.3, §6.9; issue 27): a plan dunning
 * ended and the debt it left ("Pay now" on an uncollectible invoice settles it and restores nothing,
 * ADR 0021), a refused payment with its reason and next try, a failing default card, a trial, a
 * cancellation or change waiting, usage against the plan day by day, and real tables.
 */

const RETURN = "https://console.example.com/settings/billing";
const DAY = 86_400;

/** A form post as a browser sends it, from the page's own origin. */
const post = (b: Billing, path: string, fields: Record<string, string> = {}) =>
  b.app.request(path, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded", origin: "http://localhost" }, body: new URLSearchParams(fields).toString() });

/** The page's words, as a person reads them (tags dropped, entities decoded, spaces folded). */
const words = (html: string) =>
  html
    .replace(/<[^>]+>/g, " ")
    .replace(/&#39;/g, "'")
    .replace(/&amp;/g, "&")
    .replace(/\s+/g, " ")
    .replace(/ ([.,:)])/g, "$1");

const day = (seconds: number) => new Date(seconds * 1000).toISOString().slice(0, 10);
const moment = (seconds: number) => `${new Date(seconds * 1000).toISOString().slice(0, 16).replace("T", " ")} UTC`;

/** What every state needs: a billing with a test clock, and the ways to reach each state. */
function setUp(b: () => Billing) {
  const op = () => b().as.operator();
  const advance = (seconds: number) => b().call("POST", "/operator/test-clock/advance", { headers: op(), body: { seconds } });
  const billingNow = async (): Promise<number> => (await b().call("GET", "/operator/test-clock", { headers: op() })).body.now;
  const invoicesOf = async (platformId: string) => (await b().call("GET", `/invoices?platformId=${platformId}`, { headers: op() })).body.data as any[];
  const invoice = async (id: string) => (await b().call("GET", `/invoices/${id}`, { headers: op() })).body;
  const subscriptionOf = async (platformId: string) => (await b().call("GET", `/subscription?platformId=${platformId}`, { headers: op() })).body;
  const succeededCharges = async (invoiceId: string) => (await b().db.select().from(charges).where(and(eq(charges.invoiceId, invoiceId), eq(charges.status, "succeeded")))).length;

  async function portalOf(owner: Record<string, string>, returnUrl = RETURN) {
    const r = await b().call("POST", "/portal", { headers: owner, body: { returnUrl } });
    expect(r.status).toBe(201);
    return new URL(r.body.url).pathname;
  }

  /** A starter platform whose default card fails every charge, past its period end: past due, its renewal refused once. */
  async function pastDue() {
    const up = await b().upgraded("plan_starter");
    const customerId: string = up.subscription.customerId;
    await b().call("POST", "/payment-methods/pm_card_chargeCustomerFail/attach", { headers: op(), body: { customerId, setAsDefault: true } });
    await advance(up.subscription.currentPeriodEnd - (await billingNow()) + 60);
    const renewal = (await invoicesOf(up.platformId))[0];
    expect(renewal).toMatchObject({ status: "open", attemptCount: 1 });
    return { ...up, customerId, renewal };
  }

  /** The same, after every retry (1, 3 and 5 days): the renewal uncollectible, the platform back on free. */
  async function dunned() {
    const up = await pastDue();
    await advance(6 * DAY);
    const renewal = await invoice(up.renewal.id);
    expect(renewal).toMatchObject({ status: "uncollectible", attemptCount: 4 });
    expect(await subscriptionOf(up.platformId)).toMatchObject({ tier: "free" });
    return { ...up, renewal };
  }

  return { op, advance, billingNow, invoicesOf, invoice, subscriptionOf, succeededCharges, portalOf, pastDue, dunned };
}

describe("billing's one formatting of amounts and quantities", () => {
  it("prints money with its symbol, thousands separators and the currency's minor units, and quantities exactly with separators", () => {
    expect(formatMoney(100_000, "usd")).toBe("$1,000.00");
    expect(formatMoney(100_000_000, "usd")).toBe("$1,000,000.00");
    expect(formatMoney(-1450, "eur")).toBe("-€14.50");
    expect(formatMoney(123_456, "jpy")).toBe("¥123,456");
    expect(formatQuantity("100000")).toBe("100,000");
    expect(formatQuantity("999")).toBe("999");
    expect(formatQuantity("1234.5")).toBe("1,234.5");
    // never through a float: all twelve decimal places stay
    expect(formatQuantity("1234567.000000000001")).toBe("1,234,567.000000000001");
  });
});

describe.each(testDatabases())("the portal's states on $name", (database) => {
  let b: Billing;
  beforeAll(async () => {
    b = await startBilling(database, { testClock: true });
  });
  afterAll(() => b?.close());
  const t = setUp(() => b);
  const page = async (path: string) => (await b.app.request(path)).text();

  it("says why a platform is on Free after dunning, offers Pay now for the uncollectible invoice, and paying it settles the debt without restoring the plan", async () => {
    const { owner, platformId, renewal } = await t.dunned();
    const path = await t.portalOf(owner);
    const html = await page(path);
    expect(html).not.toMatch(/<script/i);
    const shown = words(html);
    expect(shown).toContain(`Your Starter plan ended`);
    expect(shown).toContain(`because invoice ${renewal.number} ($29.00) could not be collected: Your card was declined.`);
    expect(shown).toContain("It does not bring the plan back");
    expect(html).toContain(`action="${path}/invoices/${renewal.id}/pay"`);
    expect(shown).toContain("Pay $29.00 now");
    expect(shown).toMatch(/Uncollectible \$29\.00 \$29\.00/);

    // a good card made the default: an uncollectible invoice is not charged by itself (only open ones are retried)
    expect((await post(b, `${path}/cards`, { token: "pm_card_mastercard" })).status).toBe(303);
    const mastercard = (await b.call("GET", "/payment-methods", { headers: owner })).body.data.find((c: any) => c.card.brand === "mastercard");
    expect((await post(b, `${path}/cards/${mastercard.id}/default`)).status).toBe(303);
    expect(await t.invoice(renewal.id)).toMatchObject({ status: "uncollectible", attemptCount: 4 });

    // the same form submitted twice at once: one charge
    const key = randomUUID();
    const answers = await Promise.all([post(b, `${path}/invoices/${renewal.id}/pay`, { key }), post(b, `${path}/invoices/${renewal.id}/pay`, { key })]);
    const locations = answers.filter((r) => r.status === 303).map((r) => r.headers.get("location"));
    expect(locations).toContain(`${path}?notice=debt_paid`);
    for (const r of answers) expect([303, 409]).toContain(r.status);
    expect(await t.succeededCharges(renewal.id)).toBe(1);
    expect(await t.invoice(renewal.id)).toMatchObject({ status: "paid", amountPaidCents: 2900 });
    // the debt is settled; the plan dunning ended stays ended
    expect(await t.subscriptionOf(platformId)).toMatchObject({ tier: "free", status: "active" });
    const after = words(await page(`${path}?notice=debt_paid`));
    expect(after).toContain("What was owed is settled; the plan that ended is not restored");
    expect(after).toContain("Your Starter plan ended on");
    expect(after).not.toContain("Pay $29.00 now");
    // the same form again (a reload): answered from the first, nothing charged
    const again = await post(b, `${path}/invoices/${renewal.id}/pay`, { key });
    expect(again.headers.get("location")).toBe(`${path}?notice=debt_paid`);
    expect(await t.succeededCharges(renewal.id)).toBe(1);
  });

  it("refuses Pay now of an uncollectible invoice with the failing card on the page: it stays uncollectible, no dunning resumes, and the next try has a new attempt", async () => {
    const { owner, platformId, renewal } = await t.dunned();
    const path = await t.portalOf(owner);
    const refused = await post(b, `${path}/invoices/${renewal.id}/pay`, { key: randomUUID() });
    expect(refused.status).toBe(402);
    expect(words(await refused.text())).toContain("Your card was declined.");
    expect(await t.invoice(renewal.id)).toMatchObject({ status: "uncollectible", attemptCount: 5, nextPaymentAttempt: null });
    await t.advance(10 * DAY);
    expect(await t.invoice(renewal.id)).toMatchObject({ status: "uncollectible", attemptCount: 5 });
    expect(await t.subscriptionOf(platformId)).toMatchObject({ tier: "free" });
    expect(await t.succeededCharges(renewal.id)).toBe(0);
  });

  it("keeps an uncollectible invoice's payment pending while the provider's answer is unknown: no second Pay now, then the worker finds the charge and it is paid, restoring nothing", async () => {
    const { owner, platformId, customerId, renewal } = await t.dunned();
    const path = await t.portalOf(owner);
    const lost = (await b.call("POST", "/payment-methods/pm_card_core_answerLost/attach", { headers: t.op(), body: { customerId } })).body;
    const key = randomUUID();
    const pending = await post(b, `${path}/invoices/${renewal.id}/pay`, { key, paymentMethodId: lost.id });
    expect(pending.status).toBe(202);
    expect(words(await pending.text())).toContain("Your payment is being confirmed with the payment provider: nothing will be charged twice.");
    expect(await t.invoice(renewal.id)).toMatchObject({ status: "uncollectible", collection: { state: "pending" } });
    const shown = await page(path);
    expect(shown).not.toContain(`${path}/invoices/${renewal.id}/pay`);
    expect(words(shown)).toContain("A payment of it is being confirmed.");
    // another Pay now meanwhile is refused and charges nothing
    expect((await post(b, `${path}/invoices/${renewal.id}/pay`, { key: randomUUID() })).status).toBe(409);
    // a minute later the worker asks the provider, finds the charge, and the invoice is paid once
    b.clock.advance(61_000);
    await b.ctx.worker.pass();
    expect(await t.invoice(renewal.id)).toMatchObject({ status: "paid", amountPaidCents: 2900, collection: null });
    expect(await t.succeededCharges(renewal.id)).toBe(1);
    expect(await t.subscriptionOf(platformId)).toMatchObject({ tier: "free" });
    // the same form again: its stored outcome, nothing more charged
    expect((await post(b, `${path}/invoices/${renewal.id}/pay`, { key, paymentMethodId: lost.id })).headers.get("location")).toBe(`${path}?notice=debt_paid`);
    expect(await t.succeededCharges(renewal.id)).toBe(1);
  });

  it("pays an uncollectible invoice once when the portal and an operator pay it at the same moment with different keys", async () => {
    const { owner, customerId, renewal } = await t.dunned();
    const path = await t.portalOf(owner);
    const card = (await b.call("POST", "/payment-methods/pm_card_visa/attach", { headers: t.op(), body: { customerId } })).body;
    const [portal, operator] = await Promise.all([
      post(b, `${path}/invoices/${renewal.id}/pay`, { key: randomUUID(), paymentMethodId: card.id }),
      b.call("POST", `/operator/invoices/${renewal.id}/pay`, { headers: { ...t.op(), "idempotency-key": randomUUID() }, body: { paymentMethodId: card.id } }),
    ]);
    // one of them paid it; the other was told it is paid or being paid
    expect([portal.status === 303, operator.status === 200].filter(Boolean)).toHaveLength(1);
    expect(await t.succeededCharges(renewal.id)).toBe(1);
    expect(await t.invoice(renewal.id)).toMatchObject({ status: "paid", amountPaidCents: 2900 });
    const twice = await b.call("POST", `/operator/invoices/${renewal.id}/pay`, { headers: t.op(), body: {} });
    expect(twice).toMatchObject({ status: 409, body: { error: { code: "INVOICE_NOT_OPEN" } } });
  });

  it("shows a past-due renewal's reason and next try, warns that the default card is failing, and a new default clears both", async () => {
    const { owner, platformId, renewal } = await t.pastDue();
    const path = await t.portalOf(owner);
    const shown = words(await page(path));
    expect(shown).toContain("Status Payment failed: retrying");
    expect(shown).toContain(`Invoice ${renewal.number} ($29.00) could not be charged: Your card was declined. We try again on ${moment(renewal.nextPaymentAttempt)}.`);
    expect(shown).toContain("Your default card, visa •••• 0341, was declined the last time it was charged: Your card was declined.");
    expect(shown).toContain("Add another card or make another one the default");
    expect(shown).toContain("Pay $29.00 now");

    // the first card (visa 4242, which paid the upgrade) made the default again: the renewal is retried at once and paid
    const good = (await b.call("GET", "/payment-methods", { headers: owner })).body.data.find((c: any) => c.card.last4 === "4242");
    expect((await post(b, `${path}/cards/${good.id}/default`)).status).toBe(303);
    expect(await t.invoice(renewal.id)).toMatchObject({ status: "paid" });
    const after = words(await page(path));
    expect(after).toContain("Status Active");
    expect(after).not.toContain("was declined the last time");
    expect(after).not.toContain("Your payment failed");
  });

  it("shows a trial's end and what will be charged then (the upcoming invoice's amount), to which card", async () => {
    const { owner, platformId, subscription } = await b.upgraded("plan_starter");
    const trial = await b.call("POST", `/operator/subscriptions/${subscription.id}/trial`, { headers: t.op(), body: { trialDays: 14 } });
    expect(trial.status).toBe(200);
    const upcoming = (await b.call("GET", `/invoices/upcoming?platformId=${platformId}`, { headers: owner })).body;
    const path = await t.portalOf(owner);
    const shown = words(await page(path));
    expect(shown).toContain(`Status Trial until ${day(trial.body.trialEnd)}`);
    expect(shown).toContain(`Your trial of Starter ends on ${day(trial.body.trialEnd)}. Then ${formatMoney(upcoming.amountDueCents, "usd")} is charged to visa •••• 4242 for the first month.`);
    expect(shown).toContain(`Next charge ${formatMoney(upcoming.amountDueCents, "usd")} on ${day(upcoming.nextChargeAt)}`);
  });

  it("says Cancels on <date> instead of Active while a cancellation waits, with Resume, and shows a waiting downgrade with its date", async () => {
    const { owner, subscription } = await b.upgraded("plan_growth");
    const path = await t.portalOf(owner);
    await post(b, `${path}/change`, { tier: "starter", key: randomUUID() });
    let shown = words(await page(path));
    expect(shown).toContain(`Scheduled change Starter from ${day(subscription.currentPeriodEnd)}`);
    expect(shown).toContain("Status Active");

    expect((await post(b, `${path}/cancel`)).headers.get("location")).toBe(`${path}?notice=canceled`);
    const html = await page(path);
    shown = words(html);
    expect(shown).toContain(`Status Cancels on ${day(subscription.currentPeriodEnd)}`);
    expect(shown).not.toContain("Status Active");
    expect(shown).toContain(`it stays until ${moment(subscription.currentPeriodEnd)}, then the platform is on Free. Nothing more is charged.`);
    expect(html).toContain(`action="${path}/resume"`);
    expect(shown).toContain("Resume my plan");

    expect((await post(b, `${path}/resume`)).headers.get("location")).toBe(`${path}?notice=resumed`);
    shown = words(await page(path));
    expect(shown).toContain("Status Active");
    expect(shown).not.toContain("Cancels on");
  });

  it("shows a waiting seat decrease with its date beside the seats paid for now", async () => {
    const { owner, subscription } = await b.upgraded("plan_growth");
    expect((await b.call("PATCH", `/subscriptions/${subscription.id}`, { headers: t.op(), body: { quantity: 3 } })).status).toBe(200);
    expect((await b.call("PATCH", `/subscriptions/${subscription.id}`, { headers: t.op(), body: { quantity: 2 } })).body).toMatchObject({ quantity: 3, pendingQuantity: 2 });
    const path = await t.portalOf(owner);
    const shown = words(await page(path));
    expect(shown).toContain("Plan 3 × Growth · $297.00 a month");
    expect(shown).toContain(`Seats 3, then 2 from ${day(subscription.currentPeriodEnd)}`);
  });

  it("draws each meter's usage by UTC day against what the plan includes (inline SVG, no script), with the numbers in words and in a table", async () => {
    const { owner, platformId, subscription } = await b.upgraded("plan_starter");
    // three days into the period: usage on its first day and today
    await t.advance(3 * DAY);
    const now = await t.billingNow();
    const start = subscription.currentPeriodStart;
    const events = [
      { id: randomUUID(), platformId, meter: "api_requests", quantity: "60000", timestamp: start + 60 },
      { id: randomUUID(), platformId, meter: "api_requests", quantity: "63456.5", timestamp: now },
      { id: randomUUID(), platformId, meter: "compute_minutes", quantity: 12, timestamp: now },
    ];
    expect((await b.call("POST", "/usage/events", { headers: t.op(), body: { events } })).body.accepted).toBe(3);
    const path = await t.portalOf(owner);
    const html = await page(path);
    expect(html).not.toMatch(/<script/i);
    expect(html.match(/<svg /g)).toHaveLength(3);
    const shown = words(html);
    // the table: exact quantities with separators, right-aligned
    expect(html).toContain(`<td class="amount">123,456.5</td><td class="amount">100,000</td>`);
    expect(shown).toContain("api requests: 123,456.5 used this period of 100,000 included (123.5 %), 23,456.5 beyond it; the busiest day was");
    expect(shown).toContain(`compute minutes: 12 used this period of 1,000 included (1.2 %); the busiest day was ${day(now)} with 12.`);
    // every day of the period so far has its bar (zeros included), none after today
    expect(shown).toContain(`${day(start)}: 60,000 that day, 60,000 so far`);
    expect(shown).toContain(`${day(start + DAY)}: 0 that day, 60,000 so far`);
    expect(html).not.toContain(`${day(now + DAY)}: `);
    expect(html).toContain(`<title id="usage-api_requests-title">api requests, usage so far by UTC day, ${day(start)} to`);
    expect(html).toContain(`${day(now)}: 63,456.5 that day, 123,456.5 so far`);
    // the part beyond the plan is drawn apart; the included line is there
    expect(html).toMatch(/<rect class="beyond"/);
    expect(html).toContain(`<line class="included"`);
    expect(shown).toContain(`Usage beyond the plan so far:`);
  });

  it("lists invoices in a table: each links its page and its PDF, amounts right-aligned with separators, dates in UTC, and links the billing details form", async () => {
    const { owner, invoice } = await b.upgraded("plan_scale");
    const path = await t.portalOf(owner);
    const html = await page(path);
    expect(html).toContain(`<a href="${path}/invoices/${invoice.id}" aria-label="Invoice ${invoice.number}">${invoice.number}</a>`);
    expect(html).toContain(`<td class="date" data-label="Date (UTC)">${day(invoice.finalizedAt)}</td>`);
    expect(html).toContain(`<span class="status paid">Paid</span></td><td class="amount" data-label="Total">$499.00</td><td class="amount" data-label="Owed">—</td>`);
    expect(html).toContain(`href="${path}/details"`);
    expect((await b.app.request(`${path}/invoices/${invoice.id}`)).status).toBe(200);
    // each row links its PDF under the portal session: the same file GET /invoices/{id}/pdf makes
    expect(html).toContain(`<a href="${path}/invoices/${invoice.id}/pdf" aria-label="Invoice ${invoice.number} as PDF">PDF</a>`);
    const pdf = await b.app.request(`${path}/invoices/${invoice.id}/pdf`);
    expect(pdf.status).toBe(200);
    expect(pdf.headers.get("content-type")).toBe("application/pdf");
    expect(Buffer.from(await pdf.arrayBuffer()).subarray(0, 5).toString()).toBe("%PDF-");
    // another customer's invoice is not there, through this session
    const other = await b.upgraded("plan_starter");
    expect((await b.app.request(`${path}/invoices/${other.invoice.id}/pdf`)).status).toBe(404);
  });
});

requireBrowserOrSkip();

/** The states in Chromium, photographed into test-output/screenshots/ (DESIGN §9). */
describe.skipIf(!hasChromium)("the portal's states in a real browser (Chromium)", () => {
  let b: Billing;
  let server: RunningServer;
  const browsers = new Browsers();
  beforeAll(async () => {
    b = await startBilling(testDatabases()[0]!, { testClock: true });
    server = await listen(b.app, 0, "127.0.0.1");
  });
  afterAll(async () => {
    await browsers.close();
    await server?.close();
    await b?.close();
  });
  const t = setUp(() => b);

  async function open(owner: Record<string, string>, viewport?: { width: number; height: number }): Promise<Page> {
    const path = await t.portalOf(owner, `${server.url}/plans`);
    const page = await browsers.fresh(viewport);
    page.setDefaultTimeout(8_000);
    const answer = await page.goto(`${server.url}${path}`);
    // no script can run on the page: its policy allows none, and it has none
    expect(answer!.headers()["content-security-policy"]).not.toContain("script-src");
    expect(await page.evaluate("document.scripts.length")).toBe(0);
    return page;
  }

  it("after dunning: explains the Free plan, pays the uncollectible invoice with another card chosen in the form, and says the plan is not restored", async () => {
    const { owner, platformId, renewal } = await t.dunned();
    const page = await open(owner);
    expect(await page.getByRole("heading", { name: "Your Starter plan ended" }).isVisible()).toBe(true);
    await look(page, "billing-portal-10-ended-after-dunning");
    await page.getByLabel("Add a test card").selectOption("pm_card_mastercard");
    await page.getByRole("button", { name: "Add card" }).click();
    await page.getByLabel("Pay with").selectOption({ label: "mastercard •••• 4444" });
    await page.getByRole("button", { name: "Pay $29.00 now" }).click();
    expect(await page.getByRole("status").first().innerText()).toContain("the plan that ended is not restored");
    await look(page, "billing-portal-11-debt-paid");
    expect(await t.invoice(renewal.id)).toMatchObject({ status: "paid" });
    expect(await t.subscriptionOf(platformId)).toMatchObject({ tier: "free" });
  });

  it("past due: the reason, the next try and the failing card's warning; a new default from the warning's link pays it", async () => {
    const { owner } = await t.pastDue();
    const page = await open(owner);
    expect(await page.getByRole("region", { name: "Your payment failed" }).innerText()).toMatch(/Your card was declined\. We try again on \d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC/);
    expect(await page.locator(".alert.warning").innerText()).toContain("Your default card, visa •••• 0341, was declined");
    await look(page, "billing-portal-12-past-due-failing-card");
    await page.getByRole("link", { name: "Add another card or make another one the default" }).click();
    await page.locator("section[aria-labelledby=cards] li", { hasText: "4242" }).getByRole("button", { name: "Make default" }).click();
    expect(await page.getByRole("status").first().innerText()).toContain("Default card changed");
    expect(await page.locator("dl.facts").innerText()).toMatch(/Status\s+Active/);
    expect(await page.locator(".alert.warning").count()).toBe(0);
  });

  it("draws the usage picture: an SVG per meter that renders, bars beyond the included line, and fits a phone", async () => {
    const { owner, platformId } = await b.upgraded("plan_starter");
    const now = await t.billingNow();
    await b.call("POST", "/usage/events", {
      headers: t.op(),
      body: {
        events: [
          { id: randomUUID(), platformId, meter: "api_requests", quantity: 150000, timestamp: now },
          { id: randomUUID(), platformId, meter: "storage_gb_hours", quantity: "250.5", timestamp: now },
        ],
      },
    });
    for (const [viewport, name] of [
      [undefined, "billing-portal-13-usage"],
      [{ width: 360, height: 740 }, "billing-portal-14-usage-mobile"],
    ] as const) {
      const page = await open(owner, viewport);
      const charts = page.locator("figure.usage-chart svg");
      expect(await charts.count()).toBe(3);
      const box = await charts.first().boundingBox();
      expect(box!.width).toBeGreaterThan(200);
      expect(box!.height).toBeGreaterThan(40);
      const beyond = await page.locator("figure.usage-chart rect.beyond").first().boundingBox();
      expect(beyond!.height).toBeGreaterThan(0);
      expect(await page.getByRole("img", { name: /api requests, usage so far by UTC day/ }).count()).toBe(1);
      await page.locator("figure.usage-chart summary").first().scrollIntoViewIfNeeded();
      await look(page, name);
    }
  });

  it("while a cancellation waits: Cancels on <date>, and Resume", async () => {
    const { owner } = await b.upgraded("plan_growth");
    const page = await open(owner);
    await page.getByRole("button", { name: "Cancel at the end of the period" }).click();
    expect(await page.locator("dl.facts").innerText()).toMatch(/Status\s+Cancels on \d{4}-\d{2}-\d{2}/);
    await look(page, "billing-portal-15-cancels-on");
    await page.getByRole("button", { name: "Resume my plan" }).click();
    expect(await page.locator("dl.facts").innerText()).toMatch(/Status\s+Active/);
  });
});
