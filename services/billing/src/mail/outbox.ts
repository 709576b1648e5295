import { sql } from "drizzle-orm";
import { newId, type Logger, type Mailer } from "@core/kit";
import { rowsOf, type Db } from "@core/storage";

/** What billing mails (DESIGN §6.5, §6.11). */
export type MailKind = "receipt" | "payment_failed" | "trial_ending" | "usage_alert";

export interface OutgoingMail {
  kind: MailKind;
  /** what makes the mail once: `receipt:<invoiceId>`, `payment_failed:<invoiceId>:<attempt>` … */
  dedupeKey: string;
  to: string;
  subject: string;
  text: string;
}

/**
 * The one writer of billing's mail: the rendered mail is inserted in the caller's transaction — the
 * transaction of what it tells (an invoice paid, a payment refused, a trial ending, a threshold
 * crossed) — so it exists exactly when that fact does. A second write of the same `dedupeKey`
 * (a retried transaction, a second replica) changes nothing. `wall` is wall-clock time: the drainer
 * works on the wall clock, as the webhook dispatcher does. Answers whether it was written.
 */
export async function enqueueMail(tx: Db, mail: OutgoingMail, wall: Date): Promise<boolean> {
  const at = wall.toISOString();
  const written = rowsOf<{ id: string }>(
    await tx.execute(sql`
      insert into billing.mail_outbox (id, kind, dedupe_key, "to", subject, text, created_at, next_attempt_at)
      values (${newId("mail")}, ${mail.kind}, ${mail.dedupeKey}, ${mail.to}, ${mail.subject}, ${mail.text}, ${at}::timestamptz, ${at}::timestamptz)
      on conflict (dedupe_key) do nothing
      returning id`),
  );
  return written.length === 1;
}

/** Mails claimed per statement; with SEND_TIMEOUT_MS each, a batch ends well inside its lease. */
const BATCH = 10;
/** How long one send may take before it counts as failed (nodemailer's own socket timeout is 10 minutes). */
export const SEND_TIMEOUT_MS = 60_000;
/** How long a replica holds the mails it claimed: longer than a whole batch of sends, so no other replica takes one over while it is being sent. */
export const LEASE_MS = 3 * BATCH * SEND_TIMEOUT_MS;
/** The longest wait between two tries of a mail that failed. */
export const MAX_BACKOFF_MS = 6 * 3600_000;
/** The wait after the n-th failure: 1, 2, 4 … minutes, at most MAX_BACKOFF_MS. */
export const mailBackoffMs = (failures: number) => Math.min(60_000 * 2 ** Math.min(Math.max(failures - 1, 0), 20), MAX_BACKOFF_MS);

interface ClaimedMail {
  id: string;
  kind: string;
  to: string;
  subject: string;
  text: string;
  attempts: number;
  lease_until: Date | string;
}

/** An error's own words for the table, without an SMTP URL's credentials; the log gets only its code. */
function errorText(err: unknown): string {
  const e = err as { code?: unknown; responseCode?: unknown; message?: unknown };
  const words = String(e.message ?? err).replace(/\/\/[^/@\s]+@/g, "//***@");
  return `${String(e.code ?? "error")}${e.responseCode ? ` ${String(e.responseCode)}` : ""}: ${words}`.slice(0, 500);
}

function withTimeout<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(Object.assign(new Error(`no answer from the mail server within ${ms} ms`), { code: "ETIMEDOUT" })), ms);
    timer.unref();
  });
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}

/**
 * Sends billing's mail outbox (DESIGN §6.11): the worker of every replica drains it each pass, and
 * ingestion kicks it when an alert was written. A replica claims due mails with a lease (`FOR UPDATE
 * SKIP LOCKED`, then `lease_until`), sends each with the kit's mailer (SMTP, or the outbox folder)
 * and marks it sent; a failure is tried again after 1, 2, 4 … minutes (at most 6 hours), for ever:
 * the pending gauge and the worker backlog show a mail that does not go. A replica that dies with
 * mails claimed leaves them to another once the lease ends, so a crash loses none; the lease
 * outlasts any send, so two replicas never send one mail in normal operation. A crash between the
 * send and its mark sends that mail again (at least once, as every outbox).
 */
export class MailOutbox {
  private draining: Promise<number> | null = null;

  constructor(
    private readonly db: Db,
    private readonly mailer: Mailer,
    private readonly logger: Logger,
    private readonly wallNow: () => Date,
  ) {}

  /** Sends what is due soon, without waiting for it (an answer never waits for SMTP). */
  kick(): void {
    void this.drain().catch((err: unknown) => this.logger.error({ err: (err as Error).message }, "billing mail failed; the worker tries again"));
  }

  /** Sends every mail that is due; one drain at a time in this replica. Answers how many were sent. */
  drain(): Promise<number> {
    this.draining ??= this.drainAll().finally(() => (this.draining = null));
    return this.draining;
  }

  private async drainAll(): Promise<number> {
    let sent = 0;
    for (;;) {
      const claimed = await this.claim();
      for (const mail of claimed) sent += (await this.send(mail)) ? 1 : 0;
      if (claimed.length < BATCH) return sent;
    }
  }

  /** Claims up to BATCH due mails for this replica, oldest due first. */
  async claim(): Promise<ClaimedMail[]> {
    const now = this.wallNow();
    const lease = new Date(now.getTime() + LEASE_MS);
    return rowsOf<ClaimedMail>(
      await this.db.execute(sql`
        update billing.mail_outbox set lease_until = ${lease.toISOString()}::timestamptz
        where id in (
          select id from billing.mail_outbox
          where sent_at is null and next_attempt_at <= ${now.toISOString()}::timestamptz
            and (lease_until is null or lease_until <= ${now.toISOString()}::timestamptz)
          order by next_attempt_at, id limit ${BATCH}
          for update skip locked)
        returning id, kind, "to", subject, text, attempts, lease_until`),
    );
  }

  private async send(mail: ClaimedMail): Promise<boolean> {
    const lease = new Date(mail.lease_until).toISOString();
    try {
      await withTimeout(this.mailer.send({ to: mail.to, subject: mail.subject, text: mail.text }), SEND_TIMEOUT_MS);
    } catch (err) {
      const attempts = mail.attempts + 1;
      const next = new Date(this.wallNow().getTime() + mailBackoffMs(attempts));
      // only this replica's claim is released: one whose lease ended and was taken over changes nothing
      await this.db.execute(sql`
        update billing.mail_outbox
        set attempts = ${attempts}, next_attempt_at = ${next.toISOString()}::timestamptz, lease_until = null, last_error = ${errorText(err)}
        where id = ${mail.id} and sent_at is null and lease_until = ${lease}::timestamptz`);
      // the error's words may quote the address: the log names the mail and the error's code only
      this.logger.warn({ mailId: mail.id, kind: mail.kind, attempts, code: String((err as { code?: unknown }).code ?? "unknown"), nextAttemptAt: next.toISOString() }, "billing mail not sent; tried again later");
      return false;
    }
    await this.db.execute(sql`
      update billing.mail_outbox set sent_at = ${this.wallNow().toISOString()}::timestamptz, attempts = attempts + 1, lease_until = null, last_error = null
      where id = ${mail.id} and sent_at is null`);
    this.logger.info({ mailId: mail.id, kind: mail.kind }, "billing mail sent");
    return true;
  }
}
