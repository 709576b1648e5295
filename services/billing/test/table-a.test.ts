import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConfigError, loadCommonConfig, silentLogger } from "@core/kit";
import { testDatabases } from "@core/storage";
import { loadBillingConfig } from "../src/config.js";
import { DEFAULT_PLANS } from "../src/plans.js";
import { TierSync } from "../src/tier-sync.js";
import { startBilling, type Billing } from "./support/billing.js";

const MINUTE = 60_000;

describe.each(testDatabases())("table A's plans, subscription, invoice and payment rows on $name", (database) => {
  let b: Billing;
  let op: Record<string, string>;
  beforeAll(async () => {
    b = await startBilling(database);
    op = b.as.operator();
  });
  afterAll(() => b?.close());

  it("lists the plans without a credential: ids, price ids, prices and decimal quantities", async () => {
    const r = await b.call("GET", "/plans");
    expect(r.status).toBe(200);
    expect(r.body.map((p: { id: string; priceId: string; priceCents: number }) => [p.id, p.priceId, p.priceCents])).toEqual([
      ["plan_free", "price_free_monthly", 0],
      ["plan_starter", "price_starter_monthly", 2900],
      ["plan_growth", "price_growth_monthly", 9900],
      ["plan_scale", "price_scale_monthly", 49900],
    ]);
    expect(r.body[1]).toMatchObject({ currency: "usd", interval: "month", included: { api_requests: "100000" }, overageUnitCents: { api_requests: "0.004" } });
  });

  it("answers the reserved POST /subscription with 501 naming upgrade and change-tier, under both prefixes", async () => {
    const platformId = await b.newPlatform();
    for (const path of ["/subscription", "/api/billing/subscription"]) {
      const r = await b.call("POST", path, { headers: b.as.owner(platformId) });
      expect(r.status, path).toBe(501);
      expect(r.body.error.code).toBe("NOT_IMPLEMENTED");
      expect(r.body.error.message).toContain("/api/billing/upgrade");
      expect(r.body.error.message).toContain("/subscription/change-tier");
    }
    expect((await b.call("POST", "/subscription")).status).toBe(401);
  });

  it("reads a subscription only with its platformId, and only the caller's own platform", async () => {
    const platformId = await b.newPlatform();
    const other = await b.newPlatform();
    expect((await b.call("GET", "/subscription", { headers: b.as.owner(platformId) })).status).toBe(400);
    expect((await b.call("GET", `/subscription?platformId=${other}`, { headers: b.as.owner(platformId) })).status).toBe(404);
    expect((await b.call("GET", `/subscription?platformId=${platformId}`, { headers: b.as.member(platformId) })).status).toBe(200);
    expect((await b.call("GET", `/subscription?platformId=${platformId}`, { headers: op })).status).toBe(200);
    expect((await b.call("GET", `/subscription?platformId=${platformId}`, { headers: await b.as.service() })).status).toBe(200);
    expect((await b.call("GET", "/subscription?platformId=plt_nowhere", { headers: op })).status).toBe(404);
    expect((await b.call("GET", `/subscription?platformId=${platformId}`)).status).toBe(401);
  });

  it("tells a person whose active organization has no platform which organization is active and how to switch (403)", async () => {
    // an operator who also owns a tenant's platform, acting in an organization without one
    const elsewhere = b.as.owner(null as unknown as string);
    const r = await b.call("GET", "/subscription?platformId=plt_theirs", { headers: elsewhere });
    expect(r.status).toBe(403);
    expect(r.body.error.message).toBe(
      "Your active organization has no platform to bill. You act in organization org_tenant, which has no platform. " +
        "If the platform belongs to another of your organizations, switch to it: core org list, then core org switch <slug>, or Switch on your account page.",
    );
  });

  it("cancels at the period's end (twice answers the same), and the platform is back on free after it", async () => {
    const platformId = await b.newPlatform();
    expect((await b.call("POST", "/subscription/cancel", { headers: b.as.owner(platformId) })).body.error.code).toBe("NOT_SUBSCRIBED");
    const { owner, platformId: paid, subscription } = await b.upgraded("plan_starter");
    expect((await b.call("POST", "/subscription/cancel", { headers: b.as.member(paid) })).status).toBe(403);
    const first = await b.call("POST", "/subscription/cancel", { headers: owner });
    expect(first.body).toMatchObject({ id: subscription.id, status: "active", cancelAtPeriodEnd: true });
    const again = await b.call("POST", "/api/billing/subscription/cancel", { headers: owner });
    expect(again.body).toEqual(first.body);
    b.clock.advance(32 * 86_400_000);
    await b.ctx.worker.pass();
    const now = await b.call("GET", `/subscription?platformId=${paid}`, { headers: owner });
    expect(now.body).toMatchObject({ tier: "free", status: "active" });
    expect(now.body.id).not.toBe(subscription.id);
    await b.ctx.tierSync.push(b.clock.now());
    expect((await b.platformOf(paid)).tier).toBe("free");
  });

  it("selects an invoice by platformId when given, else by the caller's platform; drafts and strangers see nothing", async () => {
    const mine = await b.upgraded("plan_starter");
    const theirs = await b.upgraded("plan_starter");
    const id = mine.invoice.id;
    expect((await b.call("GET", `/invoices/${id}?platformId=${mine.platformId}`, { headers: mine.owner })).body.id).toBe(id);
    expect((await b.call("GET", `/api/billing/invoices/${id}`, { headers: mine.owner })).body.id).toBe(id);
    expect((await b.call("GET", `/invoices/${id}`, { headers: theirs.owner })).status).toBe(404);
    expect((await b.call("GET", `/invoices/${id}?platformId=${theirs.platformId}`, { headers: op })).status).toBe(404);
    expect((await b.call("GET", `/invoices/${id}`, { headers: op })).body.id).toBe(id);
    expect((await b.call("GET", "/invoices/in_nope", { headers: op })).status).toBe(404);
    expect((await b.call("GET", "/invoices/in_nope", { headers: mine.owner })).status).toBe(404);
    const page = await b.app.request(`/invoices/${id}/html`, { headers: mine.owner });
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toContain("text/html");
    expect(page.headers.get("content-security-policy")).toContain("default-src 'none'");
    const html = await page.text();
    expect(html).toContain(mine.invoice.number);
    expect(html).toContain("$29.00");
    expect((await b.app.request(`/invoices/${id}/html`, { headers: theirs.owner })).status).toBe(404);
  });

  it("pages a platform's invoices newest first and refuses limits and cursors it did not give", async () => {
    const { owner, platformId } = await b.upgraded("plan_starter");
    for (const tier of ["growth", "scale"]) {
      b.clock.advance(MINUTE);
      expect((await b.call("POST", "/subscription/change-tier", { headers: owner, body: { tier } })).status).toBe(200);
    }
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const r: { status: number; body: { data: { number: string }[]; cursor: string | null } } = await b.call("GET", `/invoices?platformId=${platformId}&limit=1${cursor ? `&cursor=${cursor}` : ""}`, { headers: owner });
      expect(r.status).toBe(200);
      seen.push(...r.body.data.map((i) => i.number.slice(-4)));
      cursor = r.body.cursor;
    } while (cursor);
    expect(seen).toEqual(["0003", "0002", "0001"]);
    for (const query of ["limit=0", "limit=101", "cursor=not-a-cursor!", `cursor=${Buffer.from('{"k":1,"id":2}').toString("base64url")}`]) {
      expect((await b.call("GET", `/invoices?platformId=${platformId}&${query}`, { headers: owner })).status, query).toBe(400);
    }
  });

  it("makes a setup intent for the platform's customer (the caller's email when there is none yet), and lists its cards", async () => {
    const platformId = await b.newPlatform();
    const owner = b.as.owner(platformId);
    expect((await b.call("GET", "/payment-methods", { headers: owner })).body).toEqual({ data: [] });
    expect((await b.call("POST", "/setup-intent", { headers: b.as.member(platformId) })).status).toBe(403);
    // an operator's own email never becomes a tenant platform's customer
    expect((await b.call("POST", `/setup-intent?platformId=${await b.newPlatform()}`, { headers: op })).body.error.code).toBe("NO_CUSTOMER");
    expect((await b.call("POST", `/portal?platformId=${await b.newPlatform()}`, { headers: op, body: { returnUrl: "https://console.example.com/" } })).body.error.code).toBe("NO_CUSTOMER");
    const r = await b.call("POST", "/api/billing/setup-intent", { headers: owner });
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({ id: expect.stringMatching(/^seti_/), status: "requires_payment_method", customerId: expect.stringMatching(/^cus_/) });
    expect(r.body.clientSecret.startsWith(`${r.body.id}_secret_`)).toBe(true);
  });

  it("keeps the registry's tier in its outbox while the registry is down, and delivers the latest tier once it answers", async () => {
    const { owner, platformId } = await b.upgraded("plan_starter");
    // a push toward an address where nothing listens fails and keeps the row pending
    const down = new TierSync(b.db, "http://127.0.0.1:1", { tokenFor: async () => "token" }, silentLogger());
    await down.push(b.clock.now());
    expect((await b.call("POST", "/subscription/change-tier", { headers: owner, body: { tier: "growth" } })).status).toBe(200);
    await down.push(b.clock.now());
    expect((await b.platformOf(platformId)).tier).toBe("free");
    // a minute later the registry answers: the latest tier arrives, nothing is lost
    b.clock.advance(10 * MINUTE);
    await b.ctx.tierSync.push(b.clock.now());
    expect((await b.platformOf(platformId)).tier).toBe("growth");
  });
});

describe("billing's configuration", () => {
  const common = loadCommonConfig({ CORE_DATA_DIR: mkdtempSync(join(tmpdir(), "core-billing-config-")) });

  it.each([
    ["CORE_BILLING_TAX_PERCENT", "101"],
    ["CORE_BILLING_TAX_PERCENT", "-1"],
    ["CORE_BILLING_TAX_PERCENT", "abc"],
    ["CORE_BILLING_TAX_PERCENT", "8.12345"],
    ["CORE_BILLING_TEST_CLOCK", "yes"],
    ["CORE_BILLING_WORKER_INTERVAL_MS", "0"],
    ["CORE_BILLING_WEBHOOK_ALLOW_PRIVATE", "yes"],
  ])("refuses %s=%s with a ConfigError naming it", (name, value) => {
    expect(() => loadBillingConfig(common, { [name]: value })).toThrow(ConfigError);
    expect(() => loadBillingConfig(common, { [name]: value })).toThrow(name);
  });

  it("takes 8.25 % tax, the test clock, and a catalogue file", () => {
    const file = join(mkdtempSync(join(tmpdir(), "core-plans-")), "plans.json");
    writeFileSync(file, JSON.stringify(DEFAULT_PLANS.map((p) => ({ ...p, priceCents: p.priceCents * 2 }))));
    const config = loadBillingConfig(common, { CORE_BILLING_TAX_PERCENT: "8.25", CORE_BILLING_TEST_CLOCK: "1", CORE_BILLING_PLANS: file });
    expect(config).toMatchObject({ taxPercent: "8.25", testClock: true });
    expect(config.catalogue.plan("starter").priceCents).toBe(5800);
  });

  it("lets webhooks reach private addresses by default only on the embedded database", () => {
    expect(loadBillingConfig(common, {}).webhookAllowPrivate).toBe(!common.databaseUrl);
    const onPostgres = loadCommonConfig({ DATABASE_URL: "postgres://postgres@127.0.0.1:5432/postgres" });
    expect(loadBillingConfig(onPostgres, {}).webhookAllowPrivate).toBe(false);
    expect(loadBillingConfig(onPostgres, { CORE_BILLING_WEBHOOK_ALLOW_PRIVATE: "1" }).webhookAllowPrivate).toBe(true);
    expect(loadBillingConfig(common, { CORE_BILLING_WEBHOOK_ALLOW_PRIVATE: "0" }).webhookAllowPrivate).toBe(false);
  });

  it("chooses Stripe only with both secrets, and never echoes a secret in its refusal", () => {
    expect(loadBillingConfig(common, {}).stripe).toBeNull();
    const key = "sk_test_51Abcdefghijklmnop";
    const webhook = "whsec_abcdefghijklmnop";
    expect(loadBillingConfig(common, { STRIPE_SECRET_KEY: key, STRIPE_WEBHOOK_SECRET: webhook }).stripe).toEqual({ secretKey: key, webhookSecret: webhook, apiBase: undefined });
    expect(loadBillingConfig(common, { STRIPE_SECRET_KEY: key, STRIPE_WEBHOOK_SECRET: webhook, CORE_STRIPE_API_URL: "http://127.0.0.1:12111" }).stripe?.apiBase).toBe("http://127.0.0.1:12111");
    for (const [env, names] of [
      [{ STRIPE_SECRET_KEY: key }, "STRIPE_WEBHOOK_SECRET"],
      [{ STRIPE_WEBHOOK_SECRET: webhook }, "STRIPE_SECRET_KEY"],
      [{ STRIPE_SECRET_KEY: "pk_test_publishable123456", STRIPE_WEBHOOK_SECRET: webhook }, "STRIPE_SECRET_KEY"],
      [{ STRIPE_SECRET_KEY: key, STRIPE_WEBHOOK_SECRET: webhook, CORE_STRIPE_API_URL: "api.stripe.com" }, "CORE_STRIPE_API_URL"],
    ] as const) {
      let thrown: unknown;
      try {
        loadBillingConfig(common, env);
      } catch (err) {
        thrown = err;
      }
      expect(thrown).toBeInstanceOf(ConfigError);
      expect((thrown as Error).message).toContain(names);
      expect((thrown as Error).message).not.toContain("abcdefghijklmnop");
      expect((thrown as Error).message).not.toContain("publishable123456");
    }
  });

  it("refuses a catalogue file that is not JSON, or whose plans are not valid, naming the file", () => {
    const dir = mkdtempSync(join(tmpdir(), "core-plans-"));
    const broken = join(dir, "broken.json");
    writeFileSync(broken, "{ not json");
    expect(() => loadBillingConfig(common, { CORE_BILLING_PLANS: broken })).toThrow(/CORE_BILLING_PLANS: cannot read .*broken\.json/);
    const invalid = join(dir, "invalid.json");
    writeFileSync(invalid, JSON.stringify(DEFAULT_PLANS.map((p) => ({ ...p, priceCents: 29.5, included: { api_requests: "1e3" } }))));
    expect(() => loadBillingConfig(common, { CORE_BILLING_PLANS: invalid })).toThrow(/CORE_BILLING_PLANS \(.*invalid\.json\)/);
    expect(() => loadBillingConfig(common, { CORE_BILLING_PLANS: join(dir, "missing.json") })).toThrow(ConfigError);
  });
});
