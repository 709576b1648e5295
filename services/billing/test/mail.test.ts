import { mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { SMTPServer } from "smtp-server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger, createMailer } from "@core/kit";
import { rowsOf, testDatabases } from "@core/storage";
import { sql } from "drizzle-orm";
import { enqueueMail, LEASE_MS, MailOutbox } from "../src/mail/outbox.js";
import { RETRY_DAYS } from "../src/renewals.js";
import { startBilling, type Billing } from "./support/billing.js";

const BILLING_URL = "http://localhost:4200";

/** A day as a reader expects it, made independently of billing's own formatting: "1 March 2026". */
const day = (seconds: number) => new Date(seconds * 1000).toLocaleDateString("en-GB", { timeZone: "UTC", day: "numeric", month: "long", year: "numeric" });
const time = (seconds: number) => new Date(seconds * 1000).toISOString().slice(11, 16);

interface FileMail {
  file: string;
  to: string;
  subject: string;
  text: string;
}

/**
 * Billing's mail (DESIGN §6.11, §6.5): each mail is written to the outbox table in the transaction of
 * its fact and sent by the drainer through the kit's real mailer — here the outbox folder, read back
 * from disk — after the real flows: an upgrade's receipt, a refused renewal's notices with the next
 * try, a hard decline's "no retry", a trial ending three days ahead on the test clock. A crash
 * between the commit and the send, or while a mail is claimed, still sends it; two drainers never
 * send one twice; SMTP refusals are retried.
 */
describe.each(testDatabases())("billing mail on $name", (database) => {
  let b: Billing;
  let op: Record<string, string>;
  let outbox: string;
  /** customers whose next charge the provider refuses as an expired card (a hard decline) */
  const expired = new Set<string>();

  beforeAll(async () => {
    outbox = join(mkdtempSync(join(tmpdir(), "billing-mail-")), "outbox");
    b = await startBilling(
      database,
      { testClock: true, billingUrl: BILLING_URL, mail: { smtpUrl: undefined, from: "Core <billing@localhost>", outboxDir: outbox } },
      {
        realMailer: true,
        localFaults: {
          // the card expired since it was attached: the provider refuses its charge with Stripe's expired_card
          async beforeCharge(request) {
            if (!expired.has(request.customerId)) return;
            await b.db.execute(sql`
              insert into billing.charges (id, idempotency_key, customer_id, invoice_id, payment_method_id, amount_cents, currency, status, code, decline_code, created_at)
              values (${`ch_expired_${request.idempotencyKey.replace(/\W/g, "_")}`}, ${request.idempotencyKey}, ${request.customerId}, ${request.invoiceId}, ${request.paymentMethodId},
                      ${request.amountCents}, ${request.currency}, 'failed', 'expired_card', 'expired_card', now())
              on conflict do nothing`);
          },
        },
      },
    );
    op = b.as.operator();
  });
  afterAll(() => { for (const m of folder()) console.log("=====", m.file, "\n", m.subject, "\n", m.text); return b?.close(); });

  /** Every mail in the outbox folder, read from disk. */
  const folder = (): FileMail[] => {
    let files: string[];
    try {
      files = readdirSync(outbox).sort();
    } catch {
      return [];
    }
    return files.map((file) => {
      const raw = readFileSync(join(outbox, file), "utf8");
      const [head, ...body] = raw.split("\n\n");
      const field = (name: string) => head!.split("\n").find((l) => l.startsWith(`${name}: `))!.slice(name.length + 2);
      return { file, to: field("To"), subject: field("Subject"), text: body.join("\n\n") };
    });
  };
  const mailsAbout = (needle: string) => folder().filter((m) => m.subject.includes(needle) || m.text.includes(needle));
  const invoicesOf = async (platformId: string) => (await b.call("GET", `/invoices?platformId=${platformId}&limit=100`, { headers: op })).body.data as any[];
  const subscriptionOf = async (platformId: string) => (await b.call("GET", `/subscription?platformId=${platformId}`, { headers: op })).body;
  const advance = async (seconds: number) => expect((await b.call("POST", "/operator/test-clock/advance", { headers: op, body: { seconds } })).status).toBe(200);
  const billingNow = async () => (await b.call("GET", "/operator/test-clock", { headers: op })).body.now as number;
  const outboxRow = async (dedupeKey: string) =>
    rowsOf<{ id: string; sent_at: unknown; attempts: number; last_error: string | null; next_attempt_at: Date | string }>(
      await b.db.execute(sql`select id, sent_at, attempts, last_error, next_attempt_at from billing.mail_outbox where dedupe_key = ${dedupeKey}`),
    );

  it("mails a receipt with the number, amount, period, card and PDF link when an upgrade is paid", async () => {
    const { platformId, invoice } = await b.upgraded("plan_starter");
    await b.ctx.mail.drain();
    const mails = mailsAbout(invoice.number);
    expect(mails).toHaveLength(1);
    const [receipt] = mails;
    expect(receipt!.to).toBe("billing@example.com");
    expect(receipt!.subject).toBe(`Receipt for invoice ${invoice.number}: $29.00 paid`);
    expect(receipt!.text).toContain("Amount paid: $29.00");
    expect(receipt!.text).toContain(`Period:      ${day(invoice.periodStart)} to ${day(invoice.periodEnd)} (UTC)`);
    expect(receipt!.text).toContain(`Paid on:     ${day(invoice.paidAt)}, ${time(invoice.paidAt)} UTC`);
    expect(receipt!.text).toContain("Paid with:   Visa ending in 4242");
    expect(receipt!.text).toContain(`The invoice (PDF): ${BILLING_URL}/invoices/${invoice.id}/pdf`);
    expect(receipt!.text).toContain(`${BILLING_URL}/portal/open?platformId=${platformId}`);
    // sent once: another pass sends nothing again
    await b.ctx.mail.drain();
    expect(mailsAbout(invoice.number)).toHaveLength(1);
    expect(await outboxRow(`receipt:${invoice.id}`)).toEqual([expect.objectContaining({ attempts: 1, last_error: null, sent_at: expect.anything() })]);
  });

  it("writes amounts of a thousand and more with separators (more seats, prorated and charged now)", async () => {
    const { platformId, subscription } = await b.upgraded("plan_scale");
    const more = await b.call("PATCH", `/subscriptions/${subscription.id}`, { headers: op, body: { quantity: 4 } });
    expect(more.status).toBe(200);
    await b.ctx.mail.drain();
    const seats = (await invoicesOf(platformId))[0];
    expect(seats.amountPaidCents).toBeGreaterThan(100_000);
    const amount = `$${(seats.amountPaidCents / 100).toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 2 })}`;
    expect(amount).toMatch(/^\$1,\d{3}\.\d{2}$/);
    const [receipt] = mailsAbout(seats.number);
    expect(receipt!.subject).toBe(`Receipt for invoice ${seats.number}: ${amount} paid`);
    expect(receipt!.text).toContain(`Amount paid: ${amount}`);
  });

  it("mails each refused renewal attempt with the reason and the next try, then that no retry follows", async () => {
    const { platformId } = await b.upgraded("plan_starter");
    const customerId = (await subscriptionOf(platformId)).customerId;
    expect((await b.call("POST", "/payment-methods/pm_card_chargeCustomerFail/attach", { headers: op, body: { customerId, setAsDefault: true } })).status).toBe(200);
    const end = (await subscriptionOf(platformId)).currentPeriodEnd;
    await advance(end - (await billingNow()) + 60);
    const renewal = (await invoicesOf(platformId))[0];
    expect(renewal).toMatchObject({ status: "open", attemptCount: 1 });
    const [first, ...others] = mailsAbout(`Payment failed for invoice ${renewal.number}`);
    expect(others).toEqual([]);
    expect(first!.to).toBe("billing@example.com");
    expect(first!.subject).toBe(`Payment failed for invoice ${renewal.number} ($29.00)`);
    expect(first!.text).toContain("Amount:  $29.00");
    expect(first!.text).toContain("Reason:  Your card was declined.");
    // the first retry is a day after the refusal, at the renewal's hour (UTC)
    expect(renewal.nextPaymentAttempt).toBe(end + 86_400);
    expect(first!.text).toContain(`Next attempt: ${day(end + 86_400)}, ${time(end)} UTC.`);
    expect(first!.text).toContain(`Your billing portal: ${BILLING_URL}/portal/open?platformId=${platformId}`);

    for (const [i, retryDay] of RETRY_DAYS.entries()) await advance((retryDay - (RETRY_DAYS[i - 1] ?? 0)) * 86_400);
    const notices = mailsAbout(`Payment failed for invoice ${renewal.number}`);
    // one notice per refused attempt: the renewal and its three retries
    expect(notices).toHaveLength(1 + RETRY_DAYS.length);
    const last = notices.find((m) => m.text.includes("No retry will follow"))!;
    expect(last.text).toContain(`No retry will follow: all ${RETRY_DAYS.length} retries have been used, so the invoice is marked uncollectible.`);
    expect(last.text).toContain("Your platform is back on the free plan");
    expect(notices.filter((m) => m.text.includes("Next attempt:"))).toHaveLength(RETRY_DAYS.length);
  });

  it("says no retry will follow after a hard decline (an expired card)", async () => {
    const { platformId } = await b.upgraded("plan_growth");
    const customerId = (await subscriptionOf(platformId)).customerId;
    expired.add(customerId);
    const end = (await subscriptionOf(platformId)).currentPeriodEnd;
    await advance(end - (await billingNow()) + 60);
    const renewal = (await invoicesOf(platformId))[0];
    expect(renewal.status).toBe("uncollectible");
    const notices = mailsAbout(`Payment failed for invoice ${renewal.number}`);
    expect(notices).toHaveLength(1);
    expect(notices[0]!.subject).toBe(`Payment failed for invoice ${renewal.number} ($99.00)`);
    expect(notices[0]!.text).toContain("Reason:  Your card has expired.");
    expect(notices[0]!.text).toContain("No retry will follow: this card cannot be charged again, so the invoice is marked uncollectible.");
    expect(notices[0]!.text).not.toContain("Next attempt");
  });

  it("mails that a trial ends three days ahead, once, with the date, the plan and what will be charged", async () => {
    const { platformId } = await b.upgraded("plan_starter");
    // half the paid period goes by: the trial credits its unused half, so the first charge is less than the price
    await advance(14 * 86_400);
    const sub = await subscriptionOf(platformId);
    const trial = await b.call("POST", `/operator/subscriptions/${sub.id}/trial`, { headers: op, body: { trialDays: 10 } });
    expect(trial.status).toBe(200);
    const trialEnd = trial.body.trialEnd as number;
    await advance(6 * 86_400);
    expect(mailsAbout(`trial ends on`).filter((m) => m.text.includes(platformId))).toEqual([]);
    await advance(1 * 86_400 + 60); // now less than three days before the trial's end
    const upcoming = (await b.call("GET", `/invoices/upcoming?platformId=${platformId}`, { headers: op })).body;
    expect(upcoming.amountDueCents).toBeGreaterThan(0);
    expect(upcoming.amountDueCents).toBeLessThan(2900);
    const [notice, ...others] = mailsAbout(`${BILLING_URL}/portal/open?platformId=${platformId}`).filter((m) => m.subject.includes("trial ends"));
    expect(others).toEqual([]);
    expect(notice!.to).toBe("billing@example.com");
    expect(notice!.subject).toBe(`Your Starter trial ends on ${day(trialEnd)}`);
    expect(notice!.text).toContain(`Your trial of the Starter plan ends on ${day(trialEnd)}, ${time(trialEnd)} UTC.`);
    expect(notice!.text).toContain("Plan:     Starter ($29.00 a month)");
    const amount = `$${Math.floor(upcoming.amountDueCents / 100)}.${String(upcoming.amountDueCents % 100).padStart(2, "0")}`;
    expect(notice!.text).toContain(`${amount} will be charged to Visa ending in 4242 for the first month of Starter (your account's credit pays the rest).`);
    // the trial ends and is charged: a receipt, and no second trial notice
    await advance(3 * 86_400);
    expect(folder().filter((m) => m.subject.includes("trial ends") && m.text.includes(platformId))).toHaveLength(1);
  });

  it("mails a usage alert through the same outbox, written by the ingestion that crossed the threshold", async () => {
    const { platformId } = await b.upgraded("plan_starter"); // 100000 api_requests included
    const sent = await b.call("POST", "/usage/events", {
      headers: await b.as.service(),
      body: { events: [{ id: `ev-${platformId}`, platformId, meter: "api_requests", quantity: 85_000, timestamp: await billingNow() }] },
    });
    expect(sent.body).toMatchObject({ accepted: 1 });
    const rows = rowsOf<{ dedupe_key: string }>(await b.db.execute(sql`select dedupe_key from billing.mail_outbox where kind = 'usage_alert' and text like ${`%${platformId}%`}`));
    expect(rows).toHaveLength(1);
    await b.ctx.mail.drain();
    const [alert, ...others] = folder().filter((m) => m.subject.startsWith("Usage alert") && m.text.includes(platformId));
    expect(others).toEqual([]);
    expect(alert!.to).toBe("billing@example.com");
    expect(alert!.subject).toBe("Usage alert: api_requests reached 80% of what your plan includes");
    expect(alert!.text).toContain(`Platform ${platformId} has used 85000 api_requests this billing period: 80% of the 100000 its plan includes.`);
  });

  it("sends a mail written before a crash: after a restart, and after a drainer died holding it", async () => {
    // the upgrade commits its receipt; the process dies before any drain
    const { invoice } = await b.upgraded("plan_starter");
    expect(mailsAbout(invoice.number)).toEqual([]);
    expect(await outboxRow(`receipt:${invoice.id}`)).toEqual([expect.objectContaining({ sent_at: null, attempts: 0 })]);
    const restarted = b.replica();
    await restarted.app.ctx.mail.drain();
    expect(mailsAbout(invoice.number)).toHaveLength(1);

    // a drainer claims the next mail and dies before sending it: it waits out the lease, then goes
    const second = await b.upgraded("plan_starter");
    const claimed = await b.ctx.mail.claim();
    expect(claimed.map((m) => m.kind)).toContain("receipt");
    await restarted.app.ctx.mail.drain();
    expect(mailsAbout(second.invoice.number)).toEqual([]);
    b.clock.advance(LEASE_MS + 1000);
    await restarted.app.ctx.mail.drain();
    expect(mailsAbout(second.invoice.number)).toHaveLength(1);
  });

  it("writes a mail once per dedupe key, and two drainers never send one twice", async () => {
    const marker = `race-${Date.now()}`;
    const count = 25;
    await b.db.transaction(async (tx) => {
      for (let i = 0; i < count; i++) {
        expect(await enqueueMail(tx, { kind: "receipt", dedupeKey: `${marker}:${i}`, to: "race@example.com", subject: `${marker} ${i}`, text: `mail ${i}` }, b.clock.now())).toBe(true);
      }
      // the same fact told again writes nothing
      expect(await enqueueMail(tx, { kind: "receipt", dedupeKey: `${marker}:0`, to: "race@example.com", subject: `${marker} again`, text: "again" }, b.clock.now())).toBe(false);
    });
    const [one, two] = [b.replica(), b.replica()];
    await Promise.all([b.ctx.mail.drain(), one.app.ctx.mail.drain(), two.app.ctx.mail.drain(), one.app.ctx.mail.drain()]);
    const subjects = mailsAbout(marker).map((m) => m.subject).sort();
    expect(subjects).toEqual(Array.from({ length: count }, (_, i) => `${marker} ${i}`).sort());
    const rows = rowsOf<{ attempts: number; sent: boolean }>(await b.db.execute(sql`select attempts, sent_at is not null as sent from billing.mail_outbox where dedupe_key like ${`${marker}:%`}`));
    expect(rows).toHaveLength(count);
    expect(rows.every((r) => r.sent && Number(r.attempts) === 1)).toBe(true);
  });

  it("retries a mail the SMTP server refused, after a backoff, and logs no body", async () => {
    await b.ctx.mail.drain(); // everything else is sent: what follows is this test's mail alone
    const received: string[] = [];
    let refuse = true;
    const server = new SMTPServer({
      authOptional: true,
      disabledCommands: ["STARTTLS"],
      onRcptTo(_address, _session, callback) {
        if (refuse) return callback(Object.assign(new Error("Mailbox busy, try later"), { responseCode: 451 }));
        callback();
      },
      onData(stream, _session, callback) {
        let data = "";
        stream.on("data", (d) => (data += d));
        stream.on("end", () => (received.push(data), callback()));
      },
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
    const lines: string[] = [];
    const logger = createLogger("billing", "info", new Writable({ write: (chunk, _enc, done) => (lines.push(String(chunk)), done()) }) as never);
    try {
      const port = (server.server.address() as { port: number }).port;
      const smtp = new MailOutbox(b.db, createMailer({ smtpUrl: `smtp://127.0.0.1:${port}`, from: "Core <billing@localhost>", outboxDir: "/nonexistent", logger }), logger, () => b.clock.now());
      const { invoice } = await b.upgraded("plan_scale");
      expect(await smtp.drain()).toBe(0);
      const [failed] = await outboxRow(`receipt:${invoice.id}`);
      expect(failed).toMatchObject({ sent_at: null, attempts: 1 });
      expect(failed!.last_error).toContain("451");
      expect(new Date(failed!.next_attempt_at).getTime()).toBe(b.clock.now().getTime() + 60_000);
      // not due again before its backoff ends
      refuse = false;
      expect(await smtp.drain()).toBe(0);
      b.clock.advance(60_000);
      expect(await smtp.drain()).toBe(1);
      expect(received).toHaveLength(1);
      expect(received[0]).toContain(`Receipt for invoice ${invoice.number}: $499.00 paid`);
      expect(await outboxRow(`receipt:${invoice.id}`)).toEqual([expect.objectContaining({ attempts: 2, last_error: null, sent_at: expect.anything() })]);
      const log = lines.join("");
      expect(log).toContain("billing mail not sent");
      expect(log).toContain("billing mail sent");
      expect(log).not.toContain(`/invoices/${invoice.id}/pdf`);
      expect(log).not.toContain("Amount paid");
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
