import { chmodSync, existsSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { buildCli, CoreProcess, freshHome, removeScratchDirs, runCli, scratchDir, STACK_FRAME, type Finished } from "./support/cli.js";
import { startLiveBilling, type LiveBilling } from "./support/live-billing.js";
import { userWithPlatform } from "./support/live-iam.js";

const UTC_MINUTE = String.raw`\d{4}-\d\d-\d\d \d\d:\d\d UTC`;
const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\$]/g, "\\$&");
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/**
 * `core billing resume|cancel|cards|portal|upcoming|invoices show|invoices pdf` as a real process,
 * logged in to a real IAM, against the real billing service (its local payment provider) and the real
 * platform registry, over HTTP on loopback; a recording proxy shows what the CLI sent.
 */
describe.concurrent("core billing: resume, cards, portal, upcoming, one invoice and its PDF", { timeout: 90_000 }, () => {
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

  async function owner(): Promise<Owner> {
    const person = await userWithPlatform(live.iam);
    const home = freshHome();
    const done = await runCli(core, ["login", "--token", person.token, "--iam-url", live.iamUrl], { env: { CORE_HOME: home } });
    if (done.code !== 0) throw new Error(`login failed: ${done.stderr}`);
    return { home, email: person.email, token: person.token, platformId: person.platformId };
  }
  const billing = (who: { home: string }, args: string[], env: Record<string, string> = {}) =>
    runCli(core, ["billing", ...args], { env: { CORE_HOME: who.home, CORE_BILLING_URL: live.url, ...env } });
  const atTerminal = (who: { home: string }, args: string[], env: Record<string, string> = {}) =>
    new CoreProcess(core, ["billing", ...args], { env: { CORE_HOME: who.home, CORE_BILLING_URL: live.url, ...env }, terminal: true });
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
  const subscriptionOf = (who: Owner) => live.subscriptionOf(who.platformId, who.token);
  const cardsOf = async (who: Owner) => (await live.billingCall("GET", "/payment-methods", who.token)).body.data as { id: string; isDefault: boolean; card: { brand: string; last4: string } }[];
  const paid = async (tier = "starter") => {
    const who = await owner();
    succeeded(await billing(who, ["upgrade", tier]));
    return who;
  };
  const dateOf = (seconds: number) => new Date(seconds * 1000).toISOString().slice(0, 16).replace("T", " ");

  describe("cancel asks, and resume calls it off", () => {
    it("cancel without --yes and without a terminal changes nothing and says so; --json names CONFIRMATION_NEEDED", async () => {
      const ada = await paid();
      const proxy = await live.record();
      const subscription = await subscriptionOf(ada);
      const message = failed(await billing(ada, ["cancel"], { CORE_BILLING_URL: proxy.url }));
      expect(message).toBe(
        `Nothing was changed: core asks before this (Cancel platform ${ada.platformId}'s starter plan at the period's end, ${dateOf(subscription.currentPeriodEnd)} UTC?), and standard input is not a terminal to answer on. Run it again with --yes to go ahead.`,
      );
      expect(proxy.requests.map((r) => `${r.method} ${r.path}`)).toEqual(["GET /subscription"]);
      expect(await subscriptionOf(ada)).toMatchObject({ cancelAtPeriodEnd: false });
      const refused = await billing(ada, ["cancel", "--json"]);
      expect(refused.code).toBe(1);
      expect(JSON.parse(refused.stdout).error).toMatchObject({ code: "CONFIRMATION_NEEDED", details: { subscription: { id: subscription.id, cancelAtPeriodEnd: false } } });
    });

    it("on a terminal cancel asks; y cancels; -y skips the question", async () => {
      const ada = await paid();
      const cli = atTerminal(ada, ["cancel"]);
      await cli.waitFor(new RegExp(`Cancel platform ${ada.platformId}'s starter plan at the period's end, ${UTC_MINUTE}\\? \\[y/N\\]`));
      cli.type("y\n");
      expect((await cli.finished).code).toBe(0);
      expect(await subscriptionOf(ada)).toMatchObject({ cancelAtPeriodEnd: true });
      const bob = await paid();
      succeeded(await billing(bob, ["cancel", "-y"]));
      expect(await subscriptionOf(bob)).toMatchObject({ cancelAtPeriodEnd: true });
    });

    it("resume calls the cancellation off and names the next charge; --json is the subscription; resuming twice answers the same", async () => {
      const ada = await paid();
      succeeded(await billing(ada, ["cancel", "--yes"]));
      const proxy = await live.record();
      const stdout = succeeded(await billing(ada, ["resume"], { CORE_BILLING_URL: proxy.url }));
      const subscription = await subscriptionOf(ada);
      expect(subscription).toMatchObject({ tier: "starter", status: "active", cancelAtPeriodEnd: false });
      expect(stdout).toBe(`Platform ${ada.platformId}'s starter plan continues: it renews on ${dateOf(subscription.currentPeriodEnd)} UTC: the next charge is $29.00 on ${dateOf(subscription.currentPeriodEnd)} UTC.\n`);
      expect(proxy.requests[0]).toMatchObject({ method: "POST", path: "/subscription/resume", body: undefined });
      expect(json(await billing(ada, ["resume", "--json"]))).toEqual(subscription);
      expect(succeeded(await billing(ada, ["status"]))).toContain("  next charge: $29.00 on ");
    });

    it("a free platform has nothing to resume: billing's refusal, and what to do", async () => {
      const free = await owner();
      const message = failed(await billing(free, ["resume"]));
      expect(message).toContain("Resuming the subscription failed: NOT_SUBSCRIBED: The platform is on free: there is no paid subscription to resume");
      expect(message).toContain("(HTTP 409)");
      expect(message).toContain("A plan that has ended starts again with core billing upgrade <tier>.");
    });
  });

  describe("cards", () => {
    it("lists the cards as a table; --json is billing's list", async () => {
      const ada = await paid();
      const [visa] = await cardsOf(ada);
      const lines = succeeded(await billing(ada, ["cards"])).trimEnd().split("\n");
      expect(lines[0]).toMatch(/^ID +BRAND +NUMBER +EXPIRES +FUNDING +DEFAULT$/);
      expect(lines[1]).toMatch(new RegExp(`^${visa!.id} +visa +•••• 4242 +\\d\\d/\\d{4} +credit +yes$`));
      expect(lines[2]).toBe("1 card");
      expect(json(await billing(ada, ["cards", "--json"]))).toEqual((await live.billingCall("GET", "/payment-methods", ada.token)).body);
      const free = await owner();
      expect(succeeded(await billing(free, ["cards"]))).toBe("The platform has no cards. Add one: core billing cards add <pm_…> (Stripe test tokens such as pm_card_visa work with the local provider).\n");
    });

    it("add attaches a card with an Idempotency-Key; --default makes it the default; the first card of a new customer is the default", async () => {
      const ada = await paid();
      const proxy = await live.record();
      const added = succeeded(await billing(ada, ["cards", "add", "pm_card_mastercard"], { CORE_BILLING_URL: proxy.url }));
      const master = (await cardsOf(ada)).find((c) => c.card.brand === "mastercard")!;
      expect(added).toBe(`Added mastercard •••• 4444 (${master.id}). Make it the default: core billing cards default ${master.id}\n`);
      expect(master.isDefault).toBe(false);
      expect(proxy.requests[0]).toMatchObject({ method: "POST", path: "/payment-methods", body: { paymentMethodId: "pm_card_mastercard" }, idempotencyKey: expect.stringMatching(UUID) });

      const amex = json(await billing(ada, ["cards", "add", "pm_card_amex", "--default", "--json"]));
      expect(amex).toMatchObject({ id: expect.stringMatching(/^pm_/), card: { brand: "amex" }, isDefault: true });
      expect((await cardsOf(ada)).filter((c) => c.isDefault).map((c) => c.id)).toEqual([amex.id]);

      // a free platform's owner adds its first card: billing makes the customer, and the card is the default
      const free = await owner();
      expect(succeeded(await billing(free, ["cards", "add", "pm_card_visa"]))).toMatch(/^Added visa •••• 4242 \(pm_\w+\): it is the default card, which renewals charge; payments that failed were tried again with it\.\n$/);
    });

    it("a refused card: exit 1, the decline reason named, nothing attached; a malformed card is refused before sending", async () => {
      const ada = await paid();
      const message = failed(await billing(ada, ["cards", "add", "pm_card_visa_chargeDeclinedInsufficientFunds"]));
      expect(message).toContain("Adding card pm_card_visa_chargeDeclinedInsufficientFunds failed: PAYMENT_DECLINED: ");
      expect(message).toContain("decline code: insufficient_funds) (HTTP 402)");
      expect(message).toContain("The card was refused (insufficient funds): nothing was added. Try another card.");
      const done = await billing(ada, ["cards", "add", "pm_card_visa_chargeDeclinedStolenCard", "--json"]);
      expect(done.code).toBe(1);
      expect(JSON.parse(done.stdout).error).toMatchObject({ code: "PAYMENT_DECLINED", status: 402, details: { code: "card_declined", declineCode: "stolen_card" } });
      expect(await cardsOf(ada)).toHaveLength(1);

      const proxy = await live.record();
      expect(failed(await billing(ada, ["cards", "add", "4242424242424242"], { CORE_BILLING_URL: proxy.url }))).toContain('Invalid card "4242424242424242"');
      expect(failed(await billing(ada, ["cards", "default", "visa"], { CORE_BILLING_URL: proxy.url }))).toContain('Invalid payment method id "visa"');
      expect(failed(await billing(ada, ["cards", "add"], { CORE_BILLING_URL: proxy.url }))).toBe("Missing <card>. Run: core billing cards add --help");
      expect(proxy.requests).toEqual([]);
    });

    it("default makes a card the default; an unknown card and another customer's card are 404, naming nothing of theirs", async () => {
      const ada = await paid();
      succeeded(await billing(ada, ["cards", "add", "pm_card_mastercard"]));
      const master = (await cardsOf(ada)).find((c) => c.card.brand === "mastercard")!;
      const proxy = await live.record();
      expect(succeeded(await billing(ada, ["cards", "default", master.id], { CORE_BILLING_URL: proxy.url }))).toBe(
        `mastercard •••• 4444 (${master.id}) is the default card now: renewals charge it, and payments that failed were tried again with it.\n`,
      );
      expect(proxy.requests[0]).toMatchObject({ method: "POST", path: `/payment-methods/${master.id}/default`, idempotencyKey: expect.stringMatching(UUID) });
      expect((await cardsOf(ada)).find((c) => c.isDefault)!.id).toBe(master.id);

      const theirs = await paid();
      const [theirCard] = await cardsOf(theirs);
      const their = await subscriptionOf(theirs);
      for (const id of [theirCard!.id, "pm_doesnotexist"]) {
        const message = failed(await billing(ada, ["cards", "default", id]));
        expect(message).toContain(`Making ${id} the default card failed: NOT_FOUND: No such payment method (HTTP 404)`);
        expect(message).toContain("core billing cards lists the platform's cards.");
        expect(message).not.toContain(their.customerId);
        expect(message).not.toContain(theirs.platformId);
      }
      expect((await cardsOf(theirs))[0]).toMatchObject({ id: theirCard!.id, isDefault: true });
    });

    it("remove asks: without a terminal and --yes nothing is removed; --yes removes; at a terminal y removes", async () => {
      const ada = await paid();
      succeeded(await billing(ada, ["cards", "add", "pm_card_mastercard"]));
      const master = (await cardsOf(ada)).find((c) => c.card.brand === "mastercard")!;
      expect(failed(await billing(ada, ["cards", "remove", master.id]))).toBe(
        `Nothing was changed: core asks before this (Remove mastercard •••• 4444 (${master.id})?), and standard input is not a terminal to answer on. Run it again with --yes to go ahead.`,
      );
      expect(await cardsOf(ada)).toHaveLength(2);
      const removed = json(await billing(ada, ["cards", "remove", master.id, "--yes", "--json"]));
      expect(removed).toMatchObject({ id: master.id, customerId: null, isDefault: false });
      expect((await cardsOf(ada)).map((c) => c.id)).not.toContain(master.id);

      succeeded(await billing(ada, ["cards", "add", "pm_card_amex"]));
      const amex = (await cardsOf(ada)).find((c) => c.card.brand === "amex")!;
      const cli = atTerminal(ada, ["cards", "remove", amex.id]);
      await cli.waitFor(/Remove amex •••• 8431 \(pm_\w+\)\? \[y\/N\]/);
      cli.type("y\n");
      const done = await cli.finished;
      expect(done.code).toBe(0);
      expect(done.stdout).toContain(`Removed amex •••• 8431 (${amex.id}).`);
      expect((await cardsOf(ada)).map((c) => c.id)).not.toContain(amex.id);
    });

    it("removing the default card while a paid plan runs is allowed, with a warning; the plan stays", async () => {
      const ada = await paid();
      const [visa] = await cardsOf(ada);
      const subscription = await subscriptionOf(ada);
      const done = await billing(ada, ["cards", "remove", visa!.id, "--yes"]);
      expect(done.code).toBe(0);
      expect(done.stderr.trim()).toBe(
        `Warning: ${visa!.id} is the default card, and the starter plan renews on ${dateOf(subscription.currentPeriodEnd)} UTC: without a default card that payment fails. Add another: core billing cards add <pm_…> --default`,
      );
      expect(done.stdout).toBe(`Removed visa •••• 4242 (${visa!.id}). The platform has no default card now.\n`);
      expect(await cardsOf(ada)).toEqual([]);
      expect(await subscriptionOf(ada)).toMatchObject({ tier: "starter", status: "active" });
    });

    it("removing another customer's card or an unknown one is 404, naming nothing of theirs, and their card stays", async () => {
      const ada = await paid();
      const theirs = await paid();
      const [theirCard] = await cardsOf(theirs);
      const their = await subscriptionOf(theirs);
      const message = failed(await billing(ada, ["cards", "remove", theirCard!.id, "--yes"]));
      expect(message).toContain(`Removing card ${theirCard!.id} failed: NOT_FOUND: No such payment method (HTTP 404)`);
      expect(message).not.toContain(their.customerId);
      expect(message).not.toContain(theirs.platformId);
      // not among the platform's cards: nothing to ask about, billing's 404 answers without --yes too
      expect(failed(await billing(ada, ["cards", "remove", "pm_doesnotexist"]))).toContain("NOT_FOUND: No such payment method (HTTP 404)");
      expect((await cardsOf(theirs)).map((c) => c.id)).toEqual([theirCard!.id]);
    });
  });

  describe("portal", () => {
    it("prints the portal's address, which is a live portal page; Back goes to the IAM account page; --json is { id, url }", async () => {
      const ada = await paid();
      const proxy = await live.record();
      const stdout = succeeded(await billing(ada, ["portal"], { CORE_BILLING_URL: proxy.url }));
      const url = /^ {2}(http\S+)$/m.exec(stdout)![1]!;
      expect(stdout).toBe(`Billing portal (valid for an hour; anyone with the address can use it until then):\n  ${url}\n`);
      expect(url.startsWith(`${live.url}/portal/`)).toBe(true);
      expect(proxy.requests[0]).toMatchObject({ method: "POST", path: "/portal", body: { returnUrl: `${live.iamUrl}/account` } });
      const page = await fetch(url);
      expect(page.status).toBe(200);
      expect(await page.text()).toContain(`${live.iamUrl}/account`);

      const answer = json(await billing(ada, ["portal", "--return-url", "https://console.example.com/billing", "--json"]));
      expect(answer).toEqual({ id: expect.any(String), url: expect.stringMatching(/\/portal\//) });
      expect(failed(await billing(ada, ["portal", "--return-url", "ftp://example.com/"]))).toBe('Invalid --return-url "ftp://example.com/": expected an http(s) address.');
    });

    it("at a terminal it offers to open the address as core login does: Enter opens it with BROWSER", async () => {
      const ada = await paid();
      const dir = scratchDir("browser");
      const opened = join(dir, "opened.txt");
      const script = join(dir, "browser.sh");
      writeFileSync(script, `#!/bin/sh\nprintf '%s\\n' "$@" > '${opened}'\n`);
      chmodSync(script, 0o755);
      const cli = atTerminal(ada, ["portal"], { BROWSER: script });
      const [, url] = await cli.waitFor(/\n {2}(http\S+)\r?\n/);
      await cli.waitFor(/Press Enter to open it in your browser/);
      expect(existsSync(opened)).toBe(false);
      cli.type("\n");
      const done = await cli.finished;
      expect(done.code).toBe(0);
      expect(done.stdout).toContain("Opened the address in your browser.");
      await vi.waitFor(() => expect(readFileSync(opened, "utf8").trim()).toBe(url));

      // --no-browser, CI: no offer, the address only
      for (const [args, env] of [[["--no-browser"], {}], [[], { CI: "1" }]] as const) {
        const quiet = atTerminal(ada, ["portal", ...args], { BROWSER: script, ...env });
        const finished = await quiet.finished;
        expect(finished.code).toBe(0);
        expect(finished.stdout).not.toContain("Press Enter");
      }
    });
  });

  describe("invoices show and upcoming", () => {
    it("show prints the invoice with each line's quantity, unit price and amount, and the totals; --json is billing's invoice", async () => {
      const ada = await paid();
      const [first] = (await live.billingCall("GET", `/invoices?platformId=${ada.platformId}`, ada.token)).body.data;
      const stdout = succeeded(await billing(ada, ["invoices", "show", first.id]));
      const lines = stdout.trimEnd().split("\n");
      expect(lines[0]).toMatch(new RegExp(`^Invoice ${escape(first.number)} \\(${first.id}\\): paid on ${UTC_MINUTE}$`));
      // the buyer is named from the start: the platform's name, then the address
      expect(stdout).toMatch(new RegExp(`\n {2}to: {6}\\S.* <${escape(ada.email)}>\n`));
      expect(stdout).toMatch(/\n {2}period: {2}\d{4}-\d\d-\d\d → \d{4}-\d\d-\d\d\n/);
      expect(stdout).toMatch(/\nDESCRIPTION +QTY +UNIT PRICE +AMOUNT\n/);
      const line = first.lines[0];
      expect(stdout).toMatch(new RegExp(`\\n${escape(line.description)} +1 +\\$29\\.00 +\\$29\\.00\\n`));
      expect(stdout).toMatch(/\n +Subtotal {2}\$29\.00\n/);
      expect(stdout).toMatch(/\n +Total {2}\$29\.00\n/);
      expect(stdout).toMatch(/\n +Amount due {2}\$29\.00\n +Amount paid {2}\$29\.00\n$/);
      // the totals end where the amount column ends
      const amountEnd = lines.find((l) => l.startsWith("DESCRIPTION"))!.length;
      expect(lines.at(-1)!.length).toBe(amountEnd);
      expect(json(await billing(ada, ["invoices", "show", first.id, "--json"]))).toEqual((await live.billingCall("GET", `/invoices/${first.id}`, ada.token)).body);
    });

    it("another tenant's invoice is 404 and names nothing of theirs; a malformed id is refused before sending", async () => {
      const ada = await paid();
      const theirs = await paid();
      const [their] = (await live.billingCall("GET", `/invoices?platformId=${theirs.platformId}`, theirs.token)).body.data;
      const message = failed(await billing(ada, ["invoices", "show", their.id]));
      expect(message).toContain(`Reading invoice ${their.id} failed: NOT_FOUND: No such invoice (HTTP 404)`);
      expect(message).toContain("core billing invoices lists the platform's invoices.");
      expect(message).not.toContain(theirs.platformId);
      expect(message).not.toContain(their.customerId);
      const proxy = await live.record();
      expect(failed(await billing(ada, ["invoices", "show", "../plans"], { CORE_BILLING_URL: proxy.url }))).toContain('Invalid invoice id "../plans"');
      expect(failed(await billing(ada, ["invoices", "show"], { CORE_BILLING_URL: proxy.url }))).toBe("Missing <id>. Run: core billing invoices show --help");
      expect(proxy.requests).toEqual([]);
    });

    it("upcoming shows the next invoice and when it is charged; --json is billing's; a free platform has none (null)", async () => {
      const ada = await paid("growth");
      const upcoming = (await live.billingCall("GET", `/invoices/upcoming?platformId=${ada.platformId}`, ada.token)).body;
      const stdout = succeeded(await billing(ada, ["upcoming"]));
      expect(stdout).toMatch(new RegExp(`^Next invoice of platform ${ada.platformId}: \\$99\\.00 on ${escape(dateOf(upcoming.nextChargeAt))} UTC\\n`));
      expect(stdout).toMatch(/\nDESCRIPTION +QTY +UNIT PRICE +AMOUNT\n/);
      expect(stdout).toMatch(/\$99\.00 +\$99\.00\n/);
      expect(stdout).toMatch(/\n +Amount due {2}\$99\.00\n$/);
      // the upcoming invoice is made at each read: only its making time moves between two reads
      expect(json(await billing(ada, ["upcoming", "--json"]))).toEqual({ ...upcoming, createdAt: expect.any(Number) });

      const free = await owner();
      expect(succeeded(await billing(free, ["upcoming"]))).toBe(`Nothing will be charged to platform ${free.platformId}: it is on the free plan.\n`);
      expect(json(await billing(free, ["upcoming", "--json"]))).toBeNull();
      succeeded(await billing(ada, ["cancel", "--yes"]));
      expect(succeeded(await billing(ada, ["upcoming"]))).toMatch(/: the plan cancels on .+ \(core billing resume keeps it\)\.\n$/);
    });
  });

  describe("invoices pdf", () => {
    /** Does this billing serve PDFs yet? The route comes from the invoice work of the same issue. */

    it("an existing file is kept and nothing is sent without --force; -o is required", async () => {
      const ada = await paid();
      const [first] = (await live.billingCall("GET", `/invoices?platformId=${ada.platformId}`, ada.token)).body.data;
      const dir = scratchDir("pdf");
      const target = join(dir, "invoice.pdf");
      writeFileSync(target, "keep me");
      const proxy = await live.record();
      expect(failed(await billing(ada, ["invoices", "pdf", first.id, "-o", target], { CORE_BILLING_URL: proxy.url }))).toBe(
        `${target} exists already. Nothing was written: choose another -o <file>, or overwrite it with --force.`,
      );
      expect(failed(await billing(ada, ["invoices", "pdf", first.id], { CORE_BILLING_URL: proxy.url }))).toBe("Missing -o <file>: where to write the PDF. Run: core billing invoices pdf --help");
      expect(proxy.requests).toEqual([]);
      expect(readFileSync(target, "utf8")).toBe("keep me");
    });

    it("an answer that is not a PDF is refused and nothing is written", async () => {
      const ada = await owner();
      // a server that answers the PDF's address with an HTML page
      const server = createServer((_req, res) => res.writeHead(200, { "content-type": "text/html; charset=utf-8" }).end("<!doctype html><p>not a pdf</p>"));
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
      try {
        const dir = scratchDir("pdf");
        const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
        expect(failed(await billing(ada, ["invoices", "pdf", "in_x", "-o", join(dir, "x.pdf")], { CORE_BILLING_URL: url }))).toBe(
          `Billing at ${url} did not send a PDF (content type: text/html; charset=utf-8). Nothing was written.`,
        );
        expect(readdirSync(dir)).toEqual([]);
      } finally {
        await new Promise<void>((resolve) => server.close(() => resolve()));
      }
    });

    it("another tenant's invoice: billing's 404, nothing written", async () => {
      const ada = await paid();
      const theirs = await paid();
      const [their] = (await live.billingCall("GET", `/invoices?platformId=${theirs.platformId}`, theirs.token)).body.data;
      const dir = scratchDir("pdf");
      const message = failed(await billing(ada, ["invoices", "pdf", their.id, "-o", join(dir, "theirs.pdf")]));
      expect(message).toContain(`Downloading invoice ${their.id}'s PDF failed: NOT_FOUND: `);
      expect(message).not.toContain(theirs.platformId);
      expect(readdirSync(dir)).toEqual([]);
    });

    it("downloads the PDF whole; --force replaces an existing file; --json names the file", async () => {
      const ada = await paid();
      const [first] = (await live.billingCall("GET", `/invoices?platformId=${ada.platformId}`, ada.token)).body.data;
      const dir = scratchDir("pdf");
      const target = join(dir, "invoice.pdf");
      const stdout = succeeded(await billing(ada, ["invoices", "pdf", first.id, "-o", target]));
      expect(stdout).toMatch(new RegExp(`^Wrote invoice ${first.id} to ${escape(target)} \\([\\d,]+ bytes, PDF\\)\\.\\n$`));
      const bytes = readFileSync(target);
      expect(bytes.subarray(0, 5).toString("latin1")).toBe("%PDF-");
      expect(bytes.subarray(-8).toString("latin1")).toContain("%%EOF");
      writeFileSync(target, "old");
      const answer = json(await billing(ada, ["invoices", "pdf", first.id, "-o", target, "--force", "--json"]));
      expect(answer).toEqual({ invoiceId: first.id, path: target, bytes: bytes.length, contentType: expect.stringMatching(/^application\/pdf/) });
      expect(readFileSync(target).equals(bytes)).toBe(true);
      // no temporary file is left beside it
      expect(readdirSync(dir)).toEqual(["invoice.pdf"]);
    });
  });

  describe("help and suggestions", () => {
    it("the new commands are in the help, and a word of theirs typed alone is suggested", async () => {
      const home = { home: freshHome() };
      const help = (await billing(home, ["--help"])).stdout;
      for (const word of ["resume", "upcoming", "invoices show <id>", "invoices pdf <id> -o <file>", "cards", "portal"]) expect(help).toContain(`  ${word}`);
      expect((await billing(home, ["cards", "--help"])).stdout).toMatch(/^Usage: core billing cards \[add <pm_…> \[--default\] \| remove <pm_…> \[--yes\] \| default <pm_…>\]/);
      expect((await billing(home, ["cards", "remove", "--help"])).stdout).toMatch(/^Usage: core billing cards remove <pm_…> \[--yes\]/);
      expect((await billing(home, ["cancel", "--help"])).stdout).toMatch(/^Usage: core billing cancel \[--yes\]/);
      expect((await runCli(core, ["help", "billing", "invoices", "pdf"])).stdout).toMatch(/^Usage: core billing invoices pdf <id> -o <file> \[--force\]/);
      const suggest = async (args: string[]) => (await runCli(core, args)).stderr.trim();
      expect(await suggest(["cards"])).toBe('Unknown command "cards". Did you mean: core billing cards? Run: core --help');
      expect(await suggest(["resume"])).toBe('Unknown command "resume". Did you mean: core billing resume? Run: core --help');
      expect(await suggest(["portal"])).toBe('Unknown command "portal". Did you mean: core billing portal? Run: core --help');
      expect(await suggest(["upcoming"])).toBe('Unknown command "upcoming". Did you mean: core billing upcoming? Run: core --help');
      expect(await suggest(["pdf"])).toBe('Unknown command "pdf". Did you mean: core billing invoices pdf? Run: core --help');
      expect(await suggest(["billing", "card"])).toBe('Unknown command "billing card". Did you mean: core billing cards? Run: core billing --help');
      expect(await suggest(["billing", "pdf"])).toBe('Unknown command "billing pdf". Did you mean: core billing invoices pdf? Run: core billing --help');
      expect(await suggest(["billing", "cards", "ad"])).toBe('Unknown command "billing cards ad". Did you mean: core billing cards add? Run: core billing cards --help');
      expect(await suggest(["billing", "resume", "--yes"])).toBe("Unknown option --yes. Run: core billing resume --help");
    });
  });
});
