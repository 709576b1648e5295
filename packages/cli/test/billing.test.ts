import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../../../services/iam/test/support/harness.js";
import { buildCli, CoreProcess, freshHome, removeScratchDirs, runCli, STACK_FRAME, type Finished } from "./support/cli.js";
import { startLiveBilling, type LiveBilling } from "./support/live-billing.js";
import { approve, userWithPlatform } from "./support/live-iam.js";

const UTC_MINUTE = String.raw`\d{4}-\d\d-\d\d \d\d:\d\d UTC`;
const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\$]/g, "\\$&");
/** $12.34 from integer cents, as the CLI prints usd */
const dollars = (cents: number) => `${cents < 0 ? "-" : ""}$${Math.trunc(Math.abs(cents) / 100).toLocaleString("en-US")}.${String(Math.abs(cents) % 100).padStart(2, "0")}`;

/**
 * `core billing …` as a real process, logged in to a real IAM, against the real billing service (its
 * local payment provider) and the real platform registry, all over HTTP on loopback. A recording proxy
 * in front of billing shows what the CLI sent.
 */
// The tests are independent (each has its own owner and platform, and its own recording proxy), so they
// run together; each then waits for the others' processes too, hence the longer limit.
describe.concurrent("core billing", { timeout: 90_000 }, () => {
  let core: string;
  let live: LiveBilling;
  beforeAll(async () => {
    [core, live] = await Promise.all([buildCli(), startLiveBilling()]);
  });
  afterAll(async () => {
    await live?.close();
    removeScratchDirs();
  });

  interface Owner {
    home: string;
    email: string;
    token: string;
    platformId: string;
  }

  /** A new tenant owner with a platform, logged in by `core login --token` (IAM looks the session up). */
  async function owner(): Promise<Owner> {
    const person = await userWithPlatform(live.iam);
    const home = freshHome();
    const done = await runCli(core, ["login", "--token", person.token, "--iam-url", live.iamUrl], { env: { CORE_HOME: home } });
    if (done.code !== 0) throw new Error(`login failed: ${done.stderr}`);
    return { home, email: person.email, token: person.token, platformId: person.platformId };
  }

  /** The same, logged in through the device flow: `core login`, approved in the "browser". */
  async function ownerByDeviceLogin(): Promise<Owner> {
    const person = await userWithPlatform(live.iam);
    const home = freshHome();
    const cli = new CoreProcess(core, ["login", "--iam-url", live.iamUrl], { env: { CORE_HOME: home } });
    const [, userCode] = await cli.waitFor(/Your one-time code: ([A-Z]{4}-[A-Z]{4})/);
    await approve(live.iam, person, userCode!);
    const done = await cli.finished;
    if (done.code !== 0) throw new Error(`login failed: ${done.stderr}`);
    return { home, email: person.email, token: person.token, platformId: person.platformId };
  }

  /** `core billing <args>` as `who`, against the test billing (or the CORE_BILLING_URL of `env`: a recording proxy). */
  const billing = (who: { home: string }, args: string[], env: Record<string, string> = {}) =>
    runCli(core, ["billing", ...args], { env: { CORE_HOME: who.home, CORE_BILLING_URL: live.url, ...env } });
  const succeeded = (done: Finished) => {
    expect(done.stderr).toBe("");
    expect(done.code).toBe(0);
    return done.stdout;
  };
  const failed = (done: Finished) => {
    expect(done.code).toBe(1);
    expect(done.stderr).not.toMatch(STACK_FRAME);
    return done.stderr.trim();
  };
  const json = (done: Finished) => {
    expect(done.code).toBe(0);
    return JSON.parse(done.stdout);
  };
  /** What billing itself says the platform's subscription is. */
  const subscriptionOf = (who: Owner) => live.subscriptionOf(who.platformId, who.token);
  const paid = async (tier = "starter") => {
    const who = await owner();
    succeeded(await billing(who, ["upgrade", tier]));
    return who;
  };

  describe("plans", () => {
    it("prints the price list as a table, with no login and no credential sent", async () => {
      const proxy = await live.record();
      const stdout = succeeded(await billing({ home: freshHome() }, ["plans"], { CORE_BILLING_URL: proxy.url }));
      const lines = stdout.trimEnd().split("\n");
      expect(lines[0]).toMatch(/^TIER +NAME +PRICE +INCLUDED EACH MONTH$/);
      expect(lines[1]).toMatch(/^free +Free +\$0\.00\/month +10,000 api requests, 100 compute minutes, 100 storage gb hours$/);
      expect(lines[2]).toMatch(/^starter +Starter +\$29\.00\/month +100,000 api requests, 1,000 compute minutes, 1,000 storage gb hours$/);
      expect(lines[3]).toMatch(/^growth +Growth +\$99\.00\/month +1,000,000 api requests/);
      expect(lines[4]).toMatch(/^scale +Scale +\$499\.00\/month +10,000,000 api requests/);
      expect(proxy.requests).toEqual([{ method: "GET", path: "/plans", authorization: undefined, body: undefined }]);
    });

    it("--json prints billing's answer as it is", async () => {
      const answer = json(await billing({ home: freshHome() }, ["plans", "--json"]));
      const direct = await (await fetch(`${live.url}/plans`)).json();
      expect(answer).toEqual(direct);
      expect(answer[1]).toMatchObject({ id: "plan_starter", tier: "starter", priceCents: 2900, currency: "usd", interval: "month" });
    });
  });

  describe("status", () => {
    it("a free platform after a device login: the plan, its status, the period and no next charge", async () => {
      const ada = await ownerByDeviceLogin();
      const proxy = await live.record();
      const stdout = succeeded(await billing(ada, ["status"], { CORE_BILLING_URL: proxy.url }));
      expect(stdout).toMatch(
        new RegExp(`^Platform ${ada.platformId}: Free \\(free\\), active\\n  period:      ${UTC_MINUTE} → ${UTC_MINUTE}\\n  next charge: none \\(the free plan\\)\\n$`),
      );
      // billing requires platformId on GET /subscription (spec §4.4): the one IAM names for the login
      const sent = proxy.requests.find((r) => r.path === "/subscription");
      expect(sent).toMatchObject({ method: "GET", query: { platformId: ada.platformId }, authorization: expect.stringMatching(/^Bearer \S+$/) });
    });

    it("a paid platform: the upcoming invoice's amount at the period's end is the next charge; --json is billing's subscription with it", async () => {
      const ada = await paid("starter");
      const subscription = await subscriptionOf(ada);
      const end = new Date(subscription.currentPeriodEnd * 1000).toISOString().slice(0, 16).replace("T", " ");
      const stdout = succeeded(await billing(ada, ["status"]));
      expect(stdout).toContain(`Platform ${ada.platformId}: Starter (starter), active\n`);
      expect(stdout).toContain(`  next charge: $29.00 on ${end} UTC\n`);
      expect(json(await billing(ada, ["status", "--json"]))).toEqual({ ...subscription, upcoming: expect.objectContaining({ amountDueCents: 2900, nextChargeAt: subscription.currentPeriodEnd }) });
    });

    it("the next charge is what billing will take: this period's usage beyond the plan is in it (DESIGN §6.9)", async () => {
      const ada = await paid("starter");
      // 100,000 api requests are included; 250,000 more at 0.004 cents each are $10.00
      const events = [{ id: "over-1", platformId: ada.platformId, meter: "api_requests", quantity: 350_000, timestamp: Math.floor(Date.now() / 1000) }];
      const r = await fetch(`${live.url}/usage/events`, { method: "POST", headers: { authorization: `Bearer ${live.operatorToken}`, "content-type": "application/json" }, body: JSON.stringify({ events }) });
      expect(r.status).toBe(200);
      const stdout = succeeded(await billing(ada, ["status"]));
      expect(stdout).toMatch(new RegExp(`  next charge: \\$39\\.00 on ${UTC_MINUTE}\\n`));
    });

    it("a platform-less login is told so; an operator names the platform with --platform", async () => {
      const ada = await paid("starter");
      const opsHome = freshHome();
      expect((await runCli(core, ["login", "--token", live.operatorToken, "--iam-url", live.iamUrl], { env: { CORE_HOME: opsHome } })).code).toBe(0);
      expect(failed(await billing({ home: opsHome }, ["status"]))).toBe(
        "Your login names no platform, so there is no billing to show. Run core whoami to see it; operators name one with --platform <id>.",
      );
      const stdout = succeeded(await billing({ home: opsHome }, ["status", "--platform", ada.platformId]));
      expect(stdout).toContain(`Platform ${ada.platformId}: Starter (starter), active`);
    });
  });

  describe("upgrade", () => {
    it("upgrades with the default test card and the login's email, and says what was charged", async () => {
      const ada = await owner();
      const proxy = await live.record();
      const stdout = succeeded(await billing(ada, ["upgrade", "starter"], { CORE_BILLING_URL: proxy.url }));
      expect(stdout).toMatch(new RegExp(`^Upgraded platform ${ada.platformId} to Starter \\(starter\\): charged \\$29\\.00 to pm_card_visa\\.\\n  invoice:     \\S+-0001 \\(paid\\)\\n`));
      expect(stdout).toContain(`  email:       ${ada.email}\n`);
      expect(stdout).toMatch(new RegExp(`  next charge: \\$29\\.00 on ${UTC_MINUTE}\\n$`));
      const sent = proxy.requests.find((r) => r.path === "/api/billing/upgrade")!;
      expect(sent.method).toBe("POST");
      expect(sent.body).toEqual({ planId: "plan_starter", paymentMethodId: "pm_card_visa", billingEmail: ada.email, idempotencyKey: expect.stringMatching(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/) });
      expect(await subscriptionOf(ada)).toMatchObject({ tier: "starter", status: "active", customerId: expect.stringMatching(/^cus_/) });
    });

    it("--card and --email choose the card and the billing email; --json gives { subscription, invoice }", async () => {
      const ada = await owner();
      const answer = json(await billing(ada, ["upgrade", "growth", "--card", "pm_card_mastercard", "--email", "accounts@example.com", "--json"]));
      expect(answer.subscription).toMatchObject({ platformId: ada.platformId, tier: "growth", planId: "plan_growth" });
      expect(answer.invoice).toMatchObject({ status: "paid", amountDueCents: 9900, amountPaidCents: 9900, currency: "usd", customerSnapshot: { email: "accounts@example.com" } });
      expect(answer.subscription).toEqual(await subscriptionOf(ada));
    });

    it("a declined card: exit 1, the decline named, nothing charged and the platform still free", async () => {
      const ada = await owner();
      const message = failed(await billing(ada, ["upgrade", "starter", "--card", "pm_card_visa_chargeDeclined"]));
      expect(message).toContain("Upgrading to starter failed: PAYMENT_DECLINED: Your card was declined. (code: card_declined, decline code: generic_decline) (HTTP 402)");
      expect(message).toContain("Nothing was charged and the plan did not change. Try another card: core billing upgrade starter --card <pm_…>");
      expect(message).toMatch(/\nRequest id: \S+$/);
      expect(await subscriptionOf(ada)).toMatchObject({ tier: "free", customerId: null });

      const done = await billing(ada, ["upgrade", "starter", "--card", "pm_card_visa_chargeDeclinedInsufficientFunds", "--json"]);
      expect(done.code).toBe(1);
      expect(JSON.parse(done.stdout).error).toMatchObject({ code: "PAYMENT_DECLINED", status: 402, message: expect.stringContaining("decline code: insufficient_funds") });
    });

    it("a paid platform is sent to change-tier (ALREADY_SUBSCRIBED)", async () => {
      const ada = await paid("starter");
      const message = failed(await billing(ada, ["upgrade", "growth"]));
      expect(message).toContain("Upgrading to growth failed: ALREADY_SUBSCRIBED: ");
      expect(message).toContain("(HTTP 409)");
      expect(message).toContain("change it with core billing change-tier growth");
    });

    it("refuses an unknown tier or a card that is not a payment method before sending anything", async () => {
      const ada = await owner();
      const proxy = await live.record();
      const env = { CORE_BILLING_URL: proxy.url };
      expect(failed(await billing(ada, ["upgrade", "gold"], env))).toBe('Invalid tier "gold": expected starter, growth or scale.');
      expect(failed(await billing(ada, ["upgrade", "free"], env))).toBe('Invalid tier "free": expected starter, growth or scale.');
      expect(failed(await billing(ada, ["change-tier", "platinum", "--yes"], env))).toBe('Invalid tier "platinum": expected starter, growth or scale.');
      expect(failed(await billing(ada, ["upgrade", "starter", "--card", "4242424242424242"], env))).toContain('Invalid --card "4242424242424242"');
      expect(failed(await billing(ada, ["upgrade"], env))).toBe("Missing <tier>. Run: core billing upgrade --help");
      expect(proxy.requests).toEqual([]);
    });
  });

  describe("change-tier", () => {
    it("--yes shows the preview and charges exactly its amount, sending its prorationDate and amount", async () => {
      const ada = await paid("starter");
      const proxy = await live.record();
      const stdout = succeeded(await billing(ada, ["change-tier", "growth", "--yes"], { CORE_BILLING_URL: proxy.url }));
      const due = /^ {2}Due now +(\$\d+\.\d\d)$/m.exec(stdout)![1]!;
      expect(stdout).toMatch(/^Changing from starter to growth now \(prorated to the second\):\n {2}Unused time on Starter .+ +-\$\d+\.\d\d\n {2}Remaining time on Growth .+ +\$\d+\.\d\d\n {2}Due now +\$\d+\.\d\d\n/);
      expect(stdout).toMatch(new RegExp(`\\nChanged platform ${ada.platformId} to growth: charged ${escape(due)} \\(invoice \\S+-0002, paid\\)\\.\\n`));
      expect(stdout).toContain("  next charge: $99.00 on ");
      expect(stdout).not.toContain("[y/N]");

      const sent = proxy.requests;
      const preview = sent.find((r) => r.path === "/subscription/proration-preview")!;
      expect(preview.query).toEqual({ tier: "growth" });
      const change = sent.find((r) => r.path === "/subscription/change-tier")!;
      expect(change.body).toEqual({ tier: "growth", prorationDate: expect.any(Number), expectedAmountDueCents: expect.any(Number) });
      expect(dollars(change.body.expectedAmountDueCents)).toBe(due);

      const invoices = (await live.billingCall("GET", `/invoices?platformId=${ada.platformId}&limit=1`, ada.token)).body.data;
      expect(invoices[0]).toMatchObject({ status: "paid", amountDueCents: change.body.expectedAmountDueCents, amountPaidCents: change.body.expectedAmountDueCents });
      expect(await subscriptionOf(ada)).toMatchObject({ tier: "growth" });
    });

    it("--json gives { preview, subscription, invoice }, the invoice's amount the preview's; the preview goes to stderr", async () => {
      const ada = await paid("starter");
      const done = await billing(ada, ["change-tier", "scale", "--yes", "--json"]);
      const answer = json(done);
      expect(Object.keys(answer).sort()).toEqual(["invoice", "preview", "subscription"]);
      expect(answer.preview).toMatchObject({ currentTier: "starter", newTier: "scale", currency: "usd" });
      expect(answer.invoice.amountDueCents).toBe(answer.preview.amountDueCents);
      expect(answer.invoice.amountPaidCents).toBe(answer.preview.amountDueCents);
      expect(answer.subscription).toMatchObject({ tier: "scale" });
      expect(done.stderr).toContain(`Due now`);
    });

    it("without --yes and without a terminal: the preview, then a refusal, exit 1, and nothing charged", async () => {
      const ada = await paid("starter");
      const proxy = await live.record();
      const done = await billing(ada, ["change-tier", "growth"], { CORE_BILLING_URL: proxy.url });
      expect(done.code).toBe(1);
      expect(done.stdout).toContain("Changing from starter to growth now");
      expect(done.stderr.trim()).toMatch(
        /^Nothing was changed: core asks before this \(Charge \$\d+\.\d\d now\?\), and standard input is not a terminal to answer on\. Run it again with --yes to go ahead\.$/,
      );
      expect(proxy.requests.map((r) => r.path)).toEqual(["/subscription/proration-preview"]);
      expect(await subscriptionOf(ada)).toMatchObject({ tier: "starter" });

      const refused = await billing(ada, ["change-tier", "growth", "--json"]);
      expect(refused.code).toBe(1);
      expect(JSON.parse(refused.stdout).error).toMatchObject({ code: "CONFIRMATION_NEEDED", details: { preview: { currentTier: "starter", newTier: "growth" } } });
    });

    it("on a terminal it asks \"Charge $X now? [y/N]\": y charges that amount", async () => {
      const ada = await paid("starter");
      const cli = new CoreProcess(core, ["billing", "change-tier", "growth"], { env: { CORE_HOME: ada.home, CORE_BILLING_URL: live.url }, terminal: true });
      const [, asked] = await cli.waitFor(/Charge (\$\d+\.\d\d) now\? \[y\/N\]/);
      cli.type("y\n");
      const done = await cli.finished;
      expect(done.code).toBe(0);
      expect(done.stdout).toContain(`to growth: charged ${asked} (invoice`);
      expect(await subscriptionOf(ada)).toMatchObject({ tier: "growth" });
    });

    it("on a terminal, any answer but y changes nothing", async () => {
      const ada = await paid("starter");
      const cli = new CoreProcess(core, ["billing", "change-tier", "growth"], { env: { CORE_HOME: ada.home, CORE_BILLING_URL: live.url }, terminal: true });
      await cli.waitFor(/\[y\/N\]/);
      cli.type("\n");
      const done = await cli.finished;
      expect(done.code).toBe(1);
      expect(done.stdout).toContain("Nothing was changed.");
      expect(await subscriptionOf(ada)).toMatchObject({ tier: "starter" });
    });

    it("AMOUNT_CHANGED: when the amount moves between the preview and the answer, nothing is charged and the user is told to run it again", async () => {
      const ada = await paid("starter");
      const cli = new CoreProcess(core, ["billing", "change-tier", "growth"], { env: { CORE_HOME: ada.home, CORE_BILLING_URL: live.url }, terminal: true });
      const [, asked] = await cli.waitFor(/Charge (\$\d+\.\d\d) now\? \[y\/N\]/);
      // while the question waits, an operator credits the customer $5.00: the amount due drops by that
      await live.credit((await subscriptionOf(ada)).customerId, 5);
      cli.type("y\n");
      const done = await cli.finished;
      expect(done.code).toBe(1);
      expect(done.stdout).toContain("Changing to growth failed: AMOUNT_CHANGED: ");
      const shown = Math.round(Number(asked!.slice(1)) * 100);
      expect(done.stdout).toContain(`The amount due is now ${dollars(shown - 500)}, not the ${asked} shown; nothing was charged. Run core billing change-tier growth again to see the new amount.`);
      expect(await subscriptionOf(ada)).toMatchObject({ tier: "starter" });
    });

    it("a downgrade is scheduled for the period's end, charging nothing; status names the next plan", async () => {
      const ada = await paid("growth");
      const done = await billing(ada, ["change-tier", "starter", "--yes"]);
      const stdout = succeeded(done);
      expect(stdout).toMatch(new RegExp(`^Changing from growth to starter at the period's end, ${UTC_MINUTE}: growth stays until then, nothing is charged now and nothing is refunded\\.\\n`));
      expect(stdout).toMatch(new RegExp(`\\nScheduled the change to starter for ${UTC_MINUTE}: growth stays until then, and nothing was charged\\.\\n`));
      expect(await subscriptionOf(ada)).toMatchObject({ tier: "growth", pendingTier: "starter" });
      expect(succeeded(await billing(ada, ["status"]))).toMatch(new RegExp(`  next charge: \\$29\\.00 on ${UTC_MINUTE}, when the change to Starter \\(starter\\) takes effect\\n`));
    });

    it("the current tier while a downgrade waits calls the downgrade off", async () => {
      const ada = await paid("growth");
      succeeded(await billing(ada, ["change-tier", "starter", "--yes"]));
      const stdout = succeeded(await billing(ada, ["change-tier", "growth", "--yes"]));
      expect(stdout).toMatch(/^The platform is on growth, and a change waits for the period's end: keeping growth calls it off\. Nothing is charged\.\n/);
      expect(stdout).toContain(`Called off the waiting change: platform ${ada.platformId} stays on growth, and nothing was charged.\n`);
      expect(stdout).toContain("  next charge: $99.00 on ");
      expect(await subscriptionOf(ada)).toMatchObject({ tier: "growth", pendingTier: null });
    });

    it("a downgrade without --yes and without a terminal is refused as well", async () => {
      const ada = await paid("growth");
      const message = failed(await billing(ada, ["change-tier", "starter"]));
      expect(message).toMatch(new RegExp(`^Nothing was changed: core asks before this \\(Schedule the change to starter for ${UTC_MINUTE}\\?\\)`));
      expect(await subscriptionOf(ada)).toMatchObject({ tier: "growth", pendingTier: null });
    });

    it("a free platform is sent to upgrade (USE_UPGRADE), the same tier is SAME_TIER", async () => {
      const free = await owner();
      const message = failed(await billing(free, ["change-tier", "growth", "--yes"]));
      expect(message).toContain("Previewing the change to growth failed: USE_UPGRADE: ");
      expect(message).toContain("move it to a paid plan with core billing upgrade growth, which takes a card.");
      const ada = await paid("starter");
      expect(failed(await billing(ada, ["change-tier", "starter", "--yes"]))).toContain("SAME_TIER: The platform is on starter already (HTTP 409)");
    });
  });

  describe("cancel", () => {
    it("cancels at the period's end; status then shows no next charge; --json is the subscription", async () => {
      const ada = await paid("starter");
      const stdout = succeeded(await billing(ada, ["cancel", "--yes"]));
      expect(stdout).toMatch(
        new RegExp(`^Cancelled platform ${ada.platformId}'s starter plan at the period's end: it stays until ${UTC_MINUTE}, then the platform returns to free\\. Nothing more is charged\\.\\nChanged your mind before then\\? core billing resume\\n$`),
      );
      const subscription = await subscriptionOf(ada);
      expect(subscription).toMatchObject({ tier: "starter", status: "active", cancelAtPeriodEnd: true });
      const end = new Date(subscription.currentPeriodEnd * 1000).toISOString().slice(0, 16).replace("T", " ");
      expect(succeeded(await billing(ada, ["status"]))).toContain(`  next charge: none — cancels on ${end} UTC, then the platform is on free\n`);
      // cancelling twice answers the same
      expect(json(await billing(ada, ["cancel", "--json"]))).toEqual(subscription);
    });

    it("a free platform has nothing to cancel", async () => {
      const free = await owner();
      const message = failed(await billing(free, ["cancel"]));
      // nothing to cancel: nothing is asked, and billing's refusal is the answer
      expect(message).toContain("Cancelling the subscription failed: NOT_SUBSCRIBED: ");
      expect(message).toContain("there is no paid plan to cancel");
    });
  });

  describe("invoices", () => {
    it("lists the platform's invoices newest first; --json is billing's page; --limit and --cursor page through", async () => {
      const ada = await paid("starter");
      succeeded(await billing(ada, ["change-tier", "growth", "--yes"]));
      const page = json(await billing(ada, ["invoices", "--json"]));
      expect(page.cursor).toBeNull();
      expect(page.data).toHaveLength(2);
      expect(page).toEqual((await live.billingCall("GET", `/invoices?platformId=${ada.platformId}`, ada.token)).body);
      const [proration, first] = page.data;

      const lines = succeeded(await billing(ada, ["invoices"])).trimEnd().split("\n");
      expect(lines[0]).toMatch(/^NUMBER +STATUS +TOTAL +AMOUNT DUE +PERIOD +CREATED$/);
      expect(lines[1]).toMatch(new RegExp(`^${proration.number} +paid +${escape(dollars(proration.totalCents))} +${escape(dollars(proration.amountDueCents))} +\\d{4}-\\d\\d-\\d\\d → \\d{4}-\\d\\d-\\d\\d +${UTC_MINUTE}$`));
      expect(lines[2]).toMatch(new RegExp(`^${first.number} +paid +\\$29\\.00 +\\$29\\.00 +`));
      expect(lines[3]).toBe("2 invoices");

      const one = succeeded(await billing(ada, ["invoices", "--limit", "1"]));
      const cursor = /more: core billing invoices --cursor (\S+)$/m.exec(one)?.[1];
      expect(one).toContain(proration.number);
      expect(cursor).toBeDefined();
      const next = json(await billing(ada, ["invoices", "--limit", "1", "--cursor", cursor!, "--json"]));
      expect(next.data.map((i: { id: string }) => i.id)).toEqual([first.id]);
    });

    it("a platform without invoices says so; --limit outside 1-100 is refused before sending anything", async () => {
      const free = await owner();
      expect(succeeded(await billing(free, ["invoices"]))).toBe(`Platform ${free.platformId} has no invoices.\n`);
      const proxy = await live.record();
      const env = { CORE_BILLING_URL: proxy.url };
      for (const bad of ["0", "101", "ten", "1.5"]) expect(failed(await billing(free, ["invoices", "--limit", bad], env))).toContain(`Invalid --limit "${bad}": expected a whole number from 1 to 100`);
      expect(failed(await billing(free, ["invoices", "--limit"], env))).toBe("--limit needs a value. Run: core billing invoices --help");
      expect(proxy.requests).toEqual([]);
    });
  });

  describe("addresses, credentials and help", () => {
    it("billing unreachable: a clear message naming the address and how to change it, for each command", async () => {
      const ada = await owner();
      const closed = `http://127.0.0.1:${await freePort()}`;
      const expected = `Cannot reach billing at ${closed} (connection refused). Check the address (--billing-url, CORE_BILLING_URL) or whether it runs there.`;
      for (const args of [["plans"], ["status"], ["upgrade", "starter"], ["change-tier", "growth", "--yes"], ["cancel", "--yes"], ["resume"], ["invoices"], ["invoices", "show", "in_x"], ["invoices", "pdf", "in_x", "-o", join(freshHome(), "x.pdf")], ["upcoming"], ["cards"], ["cards", "add", "pm_card_visa"], ["cards", "remove", "pm_x", "--yes"], ["cards", "default", "pm_x"], ["portal", "--no-browser"]]) {
        expect(failed(await billing(ada, args, { CORE_BILLING_URL: closed }))).toBe(expected);
      }
      const done = await billing(ada, ["status", "--json"], { CORE_BILLING_URL: closed });
      expect(JSON.parse(done.stdout)).toEqual({ error: { code: "BILLING_UNREACHABLE", message: expected } });
    });

    it("--billing-url wins over CORE_BILLING_URL; the default is http://localhost:4200; a bad address is refused", async () => {
      const closed = `http://127.0.0.1:${await freePort()}`;
      const home = freshHome();
      expect((await billing({ home }, ["plans", "--billing-url", live.url], { CORE_BILLING_URL: closed })).code).toBe(0);
      const byDefault = await runCli(core, ["billing", "plans"], { env: { CORE_HOME: home, CORE_DEBUG: "1" } });
      // whatever answers there (nothing, in a test run), the request went to the default address
      expect(byDefault.stderr).toContain("GET http://localhost:4200/plans");
      expect(failed(await billing({ home }, ["plans", "--billing-url", "localhost:4200"]))).toContain('Invalid billing address "localhost:4200" (from --billing-url)');
    });

    it("not logged in: run core login, nothing sent; a token billing refuses names core login", async () => {
      const home = freshHome();
      const proxy = await live.record();
      expect(failed(await billing({ home }, ["status"], { CORE_BILLING_URL: proxy.url }))).toBe(`Not logged in (no CORE_TOKEN and no ${join(home, "credentials.json")}). Run: core login`);
      expect(proxy.requests).toEqual([]);
      const message = failed(await billing({ home }, ["resume"], { CORE_TOKEN: "revoked-token", CORE_IAM_URL: live.iamUrl }));
      expect(message).toContain("Resuming the subscription failed: UNAUTHENTICATED: ");
      expect(message).toContain(`Billing at ${live.url} does not accept the token in CORE_TOKEN: it expired or was revoked. Run: core login`);
    });

    it("core billing alone, unknown commands and --help", async () => {
      const home = { home: freshHome() };
      expect(failed(await billing(home, []))).toBe("Missing a command: core billing status|plans|upgrade|change-tier|cancel|resume|upcoming|invoices|cards|portal. Run: core billing --help");
      expect(failed(await billing(home, ["refund"]))).toBe('Unknown command "billing refund". Run: core billing --help');
      expect((await billing(home, ["--help"])).stdout).toMatch(/^Usage: core billing <command>/);
      expect((await billing(home, ["change-tier", "--help"])).stdout).toMatch(/^Usage: core billing change-tier <tier> \[--yes\]/);
      expect((await runCli(core, ["--help"])).stdout).toContain("CORE_BILLING_URL");
    });
  });
});
