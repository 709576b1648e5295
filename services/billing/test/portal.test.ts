import type { Page } from "playwright-core";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listen, type RunningServer } from "@core/kit";
import { testDatabases } from "@core/storage";
import { Browsers, hasChromium, look, requireBrowserOrSkip } from "../../../test/support/chromium.js";
import { PORTAL_SESSION_MS } from "../src/portal.js";
import { startBilling, type Billing } from "./support/billing.js";

const DAY = 86_400_000;
const RETURN = "https://console.example.com/settings/billing";

/** A form post as a browser sends it, from the page's own origin unless told otherwise. */
const post = (b: Billing, path: string, fields: Record<string, string> = {}, origin = "http://localhost") =>
  b.app.request(path, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded", origin }, body: new URLSearchParams(fields).toString() });

describe.each(testDatabases())("the customer portal over HTTP on $name", (database) => {
  let b: Billing;
  beforeAll(async () => {
    b = await startBilling(database);
  });
  afterAll(() => b?.close());

  async function portalOf(owner: Record<string, string>) {
    const r = await b.call("POST", "/portal", { headers: owner, body: { returnUrl: RETURN } });
    expect(r.status).toBe(201);
    const path = new URL(r.body.url).pathname;
    return { ...r.body, path } as { id: string; url: string; path: string };
  }

  it("answers { id, url } of our own portal page under the billing address, valid for an hour", async () => {
    const { owner } = await b.upgraded("plan_starter");
    const r = await b.call("POST", "/api/billing/portal", { headers: owner, body: { returnUrl: RETURN } });
    expect(r.status).toBe(201);
    expect(r.body.url).toBe(`http://localhost:4200/portal/${r.body.id}`);
    expect(r.body.id).toMatch(/^bps_[A-Za-z0-9_-]{43}$/);
    const page = await b.app.request(`/portal/${r.body.id}`);
    expect(page.status).toBe(200);
    expect(page.headers.get("content-security-policy")).toContain("frame-ancestors 'none'");
    // the session id is in the address: it never leaves with a Referer to the return address
    expect(page.headers.get("referrer-policy")).toBe("same-origin");
    const text = await page.text();
    expect(text).toContain("Starter");
    expect(text).toContain(`href="${RETURN}"`);
    b.clock.advance(PORTAL_SESSION_MS + 1000);
    const expired = await b.app.request(`/portal/${r.body.id}`);
    expect(expired.status).toBe(404);
    expect(await expired.text()).toContain("This billing link has expired");
  });

  it.each([
    ["a javascript: address", "javascript:alert(1)"],
    ["an ftp address", "ftp://example.com/x"],
    ["no address", ""],
    ["an address of 2049 characters", `https://example.com/${"a".repeat(2029)}`],
  ])("refuses %s as returnUrl with 400", async (_, returnUrl) => {
    const { owner } = await b.upgraded("plan_starter");
    const r = await b.call("POST", "/portal", { headers: owner, body: { returnUrl } });
    expect(r.status).toBe(400);
  });

  it("is for billing:manage: a member gets 403; a free platform's owner gets a portal with their email as the customer", async () => {
    const platformId = await b.newPlatform();
    expect((await b.call("POST", "/portal", { headers: b.as.member(platformId), body: { returnUrl: RETURN } })).status).toBe(403);
    const { path } = await portalOf(b.as.owner(platformId));
    const text = await (await b.app.request(path)).text();
    expect(text).toContain("Choose a plan");
    expect(text).toMatch(/@example\.com/);
  });

  it("answers an unknown or made-up session id with the expired page, never another customer's", async () => {
    for (const id of ["bps_nope", `bps_${"A".repeat(43)}`, "../invoices"]) {
      const r = await b.app.request(`/portal/${encodeURIComponent(id)}`);
      expect(r.status, id).toBe(404);
    }
  });

  it("adds a card (the first becomes the default), refuses a declining one on the page, makes another default and removes one", async () => {
    const platformId = await b.newPlatform();
    const { path } = await portalOf(b.as.owner(platformId));
    const added = await post(b, `${path}/cards`, { token: "pm_card_visa" });
    expect(added.status).toBe(303);
    expect(added.headers.get("location")).toBe(`${path}?notice=card_added`);
    const declined = await post(b, `${path}/cards`, { token: "pm_card_visa_chargeDeclinedInsufficientFunds" });
    expect(declined.status).toBe(402);
    expect(await declined.text()).toContain("Your card has insufficient funds.");
    // a second later: cards list oldest first, and the test's clock stands still otherwise
    b.clock.advance(1000);
    await post(b, `${path}/cards`, { token: "pm_card_mastercard" });
    const cards = (await b.call("GET", "/payment-methods", { headers: b.as.owner(platformId) })).body.data as { id: string; isDefault: boolean; card: { brand: string } }[];
    expect(cards.map((c) => [c.card.brand, c.isDefault])).toEqual([
      ["visa", true],
      ["mastercard", false],
    ]);
    expect((await post(b, `${path}/cards/${cards[1]!.id}/default`)).status).toBe(303);
    expect((await post(b, `${path}/cards/${cards[0]!.id}/remove`)).status).toBe(303);
    const after = (await b.call("GET", "/payment-methods", { headers: b.as.owner(platformId) })).body.data;
    expect(after).toEqual([expect.objectContaining({ id: cards[1]!.id, isDefault: true })]);
    // another customer's card is not one of yours
    const other = await b.upgraded("plan_starter");
    const theirs = (await b.call("GET", "/payment-methods", { headers: other.owner })).body.data[0].id;
    expect((await post(b, `${path}/cards/${theirs}/remove`)).status).toBe(404);
  });

  it("refuses a form posted from another origin with 403 and changes nothing", async () => {
    const { owner, platformId } = await b.upgraded("plan_starter");
    const { path } = await portalOf(owner);
    const r = await post(b, `${path}/cancel`, {}, "https://evil.example");
    expect(r.status).toBe(403);
    expect((await b.call("GET", `/subscription?platformId=${platformId}`, { headers: b.as.owner(platformId) })).body.cancelAtPeriodEnd).toBe(false);
  });

  it("shows an upgrade's proration before charging, charges exactly it, and a second submit of the same form charges nothing more", async () => {
    const { owner, platformId } = await b.upgraded("plan_starter");
    // a week into the period (the test's clock is the wall clock too: the portal link is made after it)
    b.clock.advance(7 * DAY);
    const { path } = await portalOf(owner);
    const preview = (await b.call("GET", "/subscription/proration-preview?tier=growth", { headers: owner })).body;
    const page = await (await b.app.request(`${path}/change?tier=growth`)).text();
    const money = (cents: number) => `$${(cents / 100).toFixed(2)}`;
    expect(page).toContain(money(preview.amountDueCents));
    const hidden = Object.fromEntries([...page.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)"/g)].map((m) => [m[1]!, m[2]!]));
    expect(hidden).toMatchObject({ tier: "growth", prorationDate: String(preview.prorationDate), expectedAmountDueCents: String(preview.amountDueCents) });
    const first = await post(b, `${path}/change`, hidden);
    expect(first.status).toBe(303);
    expect(first.headers.get("location")).toBe(`${path}?notice=changed`);
    const again = await post(b, `${path}/change`, hidden);
    expect(again.status).toBe(303);
    const paid = (await b.call("GET", `/invoices?platformId=${platformId}`, { headers: owner })).body.data;
    expect(paid).toHaveLength(2);
    expect(paid[0].amountPaidCents).toBe(preview.amountDueCents);
    expect((await b.call("GET", `/subscription?platformId=${platformId}`, { headers: owner })).body.tier).toBe("growth");
  });

  it("shows the new amount and charges nothing when it changed since the preview (409)", async () => {
    const { owner, platformId } = await b.upgraded("plan_starter");
    const { path } = await portalOf(owner);
    const r = await post(b, `${path}/change`, { tier: "scale", expectedAmountDueCents: "1", key: crypto.randomUUID() });
    expect(r.status).toBe(409);
    expect(await r.text()).toContain("The amount changed since you looked");
    expect((await b.call("GET", `/invoices?platformId=${platformId}`, { headers: owner })).body.data).toHaveLength(1);
  });

  it("schedules a downgrade, cancels and resumes from the page", async () => {
    const { owner, platformId } = await b.upgraded("plan_growth");
    const { path } = await portalOf(owner);
    const down = await post(b, `${path}/change`, { tier: "starter", key: crypto.randomUUID() });
    expect(down.headers.get("location")).toBe(`${path}?notice=scheduled`);
    expect((await b.call("GET", `/subscription?platformId=${platformId}`, { headers: owner })).body).toMatchObject({ tier: "growth", pendingTier: "starter" });
    expect((await post(b, `${path}/cancel`)).headers.get("location")).toBe(`${path}?notice=canceled`);
    expect((await b.call("GET", `/subscription?platformId=${platformId}`, { headers: owner })).body.cancelAtPeriodEnd).toBe(true);
    expect((await post(b, `${path}/resume`)).headers.get("location")).toBe(`${path}?notice=resumed`);
    expect((await b.call("GET", `/subscription?platformId=${platformId}`, { headers: owner })).body.cancelAtPeriodEnd).toBe(false);
  });

  it("subscribes a free platform from the page with its default card, and shows its invoice", async () => {
    const platformId = await b.newPlatform();
    const owner = b.as.owner(platformId);
    const { path } = await portalOf(owner);
    const noCard = await post(b, `${path}/change`, { tier: "starter", key: crypto.randomUUID() });
    expect(noCard.status).toBe(409);
    expect(await noCard.text()).toContain("Add a card first.");
    await post(b, `${path}/cards`, { token: "pm_card_amex" });
    const r = await post(b, `${path}/change`, { tier: "starter", key: crypto.randomUUID() });
    expect(r.headers.get("location")).toBe(`${path}?notice=subscribed`);
    const invoice = (await b.call("GET", `/invoices?platformId=${platformId}`, { headers: owner })).body.data[0];
    expect(invoice).toMatchObject({ status: "paid", amountPaidCents: 2900 });
    const printed = await b.app.request(`${path}/invoices/${invoice.id}`);
    expect(printed.status).toBe(200);
    expect(await printed.text()).toContain(invoice.number);
    // an invoice of another platform is not found through this session
    const other = await b.upgraded("plan_starter");
    expect((await b.app.request(`${path}/invoices/${other.invoice.id}`)).status).toBe(404);
  });
});

/**
 * A platform whose renewal was refused (its default card declines every charge): past due, its
 * renewal open. With `goodCardBack`, its first card is the default again in the records only (a new
 * default through the API would retry at once), so the payment is left to the portal.
 */
async function refusedRenewal(b: Billing, options: { goodCardBack: boolean }) {
  const up = await b.upgraded("plan_starter");
  const op = b.as.operator();
  const good = (await b.call("GET", `/customers/${up.subscription.customerId}`, { headers: op })).body.defaultPaymentMethodId;
  await b.call("POST", "/payment-methods/pm_card_chargeCustomerFail/attach", { headers: op, body: { customerId: up.subscription.customerId, setAsDefault: true } });
  b.clock.set(new Date((up.subscription.currentPeriodEnd + 60) * 1000));
  await b.ctx.worker.pass();
  const open = (await b.call("GET", `/invoices?platformId=${up.platformId}`, { headers: up.owner })).body.data[0];
  expect(open).toMatchObject({ status: "open", attemptCount: 1 });
  if (options.goodCardBack) await b.engine.db.execute(sql`update billing.customers set default_payment_method_id = ${good} where id = ${up.subscription.customerId}`);
  return { ...up, op, open };
}

describe.each(testDatabases())("the portal's Pay now on $name (DESIGN §6.9)", (database) => {
  let b: Billing;
  beforeAll(async () => {
    b = await startBilling(database);
  });
  afterAll(() => b?.close());

  it("pays a refused renewal with Pay now: a refusal on the page and a dunning attempt, then paid; an answer still unknown is shown being confirmed, then settles", async () => {
    const { platformId, owner, subscription, op, open } = await refusedRenewal(b, { goodCardBack: false });
    const r = await b.call("POST", "/portal", { headers: owner, body: { returnUrl: RETURN } });
    const path = new URL(r.body.url).pathname;
    const page = await (await b.app.request(path)).text();
    expect(page).toContain(`action="${path}/invoices/${open.id}/pay"`);
    expect(page).toContain("Pay $29.00 now");

    const refused = await post(b, `${path}/invoices/${open.id}/pay`, { key: crypto.randomUUID() });
    expect(refused.status).toBe(402);
    expect(await refused.text()).toContain("Your card was declined.");
    expect((await b.call("GET", `/invoices/${open.id}`, { headers: owner })).body).toMatchObject({ status: "open", attemptCount: 2 });

    // a card whose first answer is lost: the page says the payment is being confirmed, and offers no second payment
    const lost = (await b.call("POST", "/payment-methods/pm_card_core_answerLost/attach", { headers: op, body: { customerId: subscription.customerId } })).body;
    // a new default card retries the refused invoice at once (DESIGN §6.3): its answer is lost
    await b.call("POST", `/payment-methods/${lost.id}/set-default`, { headers: op, body: { customerId: subscription.customerId } });
    const confirming = (await b.call("GET", `/invoices/${open.id}`, { headers: owner })).body;
    expect(confirming).toMatchObject({ status: "open", collection: { state: "pending" } });
    const shown = await (await b.app.request(path)).text();
    expect(shown).toContain("Payment being confirmed");
    expect(shown).not.toContain(`${path}/invoices/${open.id}/pay`);
    const again = await post(b, `${path}/invoices/${open.id}/pay`, { key: crypto.randomUUID() });
    expect(again.status).toBe(409);
    // a minute later billing asks the provider, finds the charge, and the invoice is paid, once
    b.clock.advance(61_000);
    await b.ctx.worker.pass();
    expect((await b.call("GET", `/invoices/${open.id}`, { headers: owner })).body).toMatchObject({ status: "paid", collection: null });
    expect((await b.call("GET", `/subscription?platformId=${platformId}`, { headers: owner })).body.status).toBe("active");
  });

  it("Pay now answers a double submit (the same form) once, and the page says it is paid", async () => {
    const { owner, open } = await refusedRenewal(b, { goodCardBack: true });
    const portal = await b.call("POST", "/portal", { headers: owner, body: { returnUrl: RETURN } });
    const path = new URL(portal.body.url).pathname;
    const key = crypto.randomUUID();
    const [first, second] = await Promise.all([post(b, `${path}/invoices/${open.id}/pay`, { key }), post(b, `${path}/invoices/${open.id}/pay`, { key })]);
    const locations = [first, second].filter((x) => x.status === 303).map((x) => x.headers.get("location"));
    expect(locations).toContain(`${path}?notice=paid`);
    expect(await (await b.app.request(`${path}?notice=paid`)).text()).toContain("Paid. Thank you.");
    expect((await b.call("GET", `/invoices/${open.id}`, { headers: owner })).body).toMatchObject({ status: "paid" });
  });
});

requireBrowserOrSkip();

/**
 * The portal as a person uses it, in Chromium (DESIGN §6.1, §9): the page from POST /portal, a
 * card added, a plan change previewed and confirmed, cancel and resume, an invoice opened, back to
 * where they came from. Every page is photographed into test-output/screenshots/.
 */
describe.skipIf(!hasChromium)("the customer portal in a real browser (Chromium)", () => {
  let b: Billing;
  let server: RunningServer;
  const browsers = new Browsers();
  beforeAll(async () => {
    b = await startBilling(testDatabases()[0]!);
    server = await listen(b.app, 0, "127.0.0.1");
  });
  afterAll(async () => {
    await browsers.close();
    await server?.close();
    await b?.close();
  });

  const heading = (page: Page) => page.locator("h1").innerText();

  it("adds a card, previews and confirms an upgrade, cancels and resumes, opens an invoice, and goes back", async () => {
    const platformId = await b.newPlatform();
    const owner = b.as.owner(platformId);
    const session = await b.call("POST", "/portal", { headers: owner, body: { returnUrl: `${server.url}/plans` } });
    const page = await browsers.fresh();
    page.setDefaultTimeout(8_000);
    await page.goto(`${server.url}${new URL(session.body.url).pathname}`);
    expect(await heading(page)).toBe("Billing");
    await look(page, "billing-portal-01-free");

    await page.getByLabel("Add a test card").selectOption("pm_card_visa");
    await page.getByRole("button", { name: "Add card" }).click();
    expect(await page.getByRole("status").innerText()).toBe("Card added.");
    expect(await page.locator("section[aria-labelledby=cards] ul").innerText()).toContain("visa •••• 4242");

    await page.getByRole("link", { name: "Preview Growth" }).click();
    expect(await heading(page)).toBe("Change to Growth");
    expect(await page.locator("main").innerText()).toContain("$99.00 is charged now for the first month, to visa •••• 4242");
    await look(page, "billing-portal-02-subscribe-preview");
    await page.getByRole("button", { name: "Confirm and pay" }).click();
    expect(await page.getByRole("status").innerText()).toBe("Subscribed. The first month is paid.");
    expect(await page.locator("dl.facts").innerText()).toMatch(/Plan\s+Growth · \$99\.00 a month/);
    await look(page, "billing-portal-03-growth");
    // a minute later (the test's clock stands still otherwise, and invoices list newest first)
    b.clock.advance(60_000);

    await page.getByRole("link", { name: "Preview Scale" }).click();
    const shown = await page.locator("tfoot").innerText();
    expect(shown).toMatch(/Charged now\s+\$[0-9,.]+/);
    await look(page, "billing-portal-04-upgrade-preview");
    await page.getByRole("button", { name: "Confirm and pay" }).click();
    expect(await page.getByRole("status").innerText()).toBe("Plan changed.");

    await page.getByRole("button", { name: "Cancel at the end of the period" }).click();
    expect(await page.locator("dl.facts").innerText()).toContain("Nothing: the plan ends on");
    await look(page, "billing-portal-05-canceling");
    await page.getByRole("button", { name: "Resume my plan" }).click();
    expect(await page.getByRole("status").innerText()).toBe("Your plan continues.");

    const invoices = page.locator("section[aria-labelledby=invoices] a");
    // each of the two invoices links its page and its PDF
    expect(await invoices.count()).toBe(4);
    expect(await page.locator("section[aria-labelledby=invoices] a", { hasText: "PDF" }).count()).toBe(2);
    await invoices.first().click();
    expect(await heading(page)).toMatch(/^Invoice [A-Z0-9]{8}-0002$/);
    await look(page, "billing-portal-06-invoice");
    await page.goBack();

    await page.getByRole("link", { name: "← Back" }).click();
    expect(page.url()).toBe(`${server.url}/plans`);
  });

  it("pays a refused renewal with Pay now, and the next charge shows what the renewal will take", async () => {
    const { platformId, owner } = await refusedRenewal(b, { goodCardBack: true });
    const session = await b.call("POST", "/portal", { headers: owner, body: { returnUrl: `${server.url}/plans` } });
    const page = await browsers.fresh();
    page.setDefaultTimeout(8_000);
    await page.goto(`${server.url}${new URL(session.body.url).pathname}`);
    expect(await page.locator("dl.facts").innerText()).toMatch(/Status\s+Payment failed: retrying/);
    await look(page, "billing-portal-08-past-due");
    await page.getByRole("button", { name: "Pay $29.00 now" }).click();
    expect(await page.getByRole("status").innerText()).toBe("Paid. Thank you.");
    expect(await page.locator("dl.facts").innerText()).toMatch(/Status\s+Active/);
    const upcoming = (await b.call("GET", `/invoices/upcoming?platformId=${platformId}`, { headers: owner })).body;
    expect(await page.locator("dl.facts").innerText()).toContain(`Next charge\n$${(upcoming.amountDueCents / 100).toFixed(2)} on`);
    await look(page, "billing-portal-09-paid");
  });

  it("fits a phone: one column at 360 px, readable, nothing wider than the window", async () => {
    const { owner } = await b.upgraded("plan_starter");
    const session = await b.call("POST", "/portal", { headers: owner, body: { returnUrl: "https://console.example.com/" } });
    const page = await browsers.fresh({ width: 360, height: 740 });
    await page.goto(`${server.url}${new URL(session.body.url).pathname}`);
    await look(page, "billing-portal-07-mobile");
  });
});
