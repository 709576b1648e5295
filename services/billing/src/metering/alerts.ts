import { eq, sql } from "drizzle-orm";
import type { Logger, Mailer } from "@core/kit";
import { rowsOf, type Db } from "@core/storage";
import { customers, usageAlerts } from "../db/schema.js";
import { canonical } from "./events.js";

/** How long a replica holds the alerts it is mailing before another may take them over. */
const CLAIM_MS = 5 * 60_000;
/** The longest wait between two attempts at a mail that failed. */
const MAX_BACKOFF_MS = 6 * 3600_000;
const BATCH = 50;

interface ClaimedAlert {
  id: string;
  platform_id: string;
  meter: string;
  threshold_percent: number;
  quantity: string;
  included: string;
  notify_attempts: number;
}

/**
 * Mails each usage alert to the platform's billing email (DESIGN §6.5). Ingestion writes the alert in
 * its transaction; this outbox sends it after the commit — at once when ingestion kicks it, else on
 * the worker's next pass — so a crash never loses a mail. Replicas claim alerts with a lease (`FOR
 * UPDATE SKIP LOCKED`), so two never mail one alert at the same moment; a mail that fails is tried
 * again with a growing wait.
 */
export class AlertMailer {
  private draining: Promise<number> | null = null;

  constructor(
    private readonly db: Db,
    private readonly mailer: Mailer,
    private readonly logger: Logger,
    private readonly wallNow: () => Date,
    private readonly billingUrl: string,
  ) {}

  /** Mails what is pending soon, without waiting for it (ingestion's answer does not wait for SMTP). */
  kick(): void {
    void this.drain().catch((err: unknown) => this.logger.error({ err: (err as Error).message }, "usage alert mail failed; the worker tries again"));
  }

  /** Mails every alert that is due; one drain at a time in this replica. Answers how many were sent. */
  drain(): Promise<number> {
    this.draining ??= this.drainAll().finally(() => (this.draining = null));
    return this.draining;
  }

  private async drainAll(): Promise<number> {
    let sent = 0;
    for (;;) {
      const claimed = await this.claim();
      for (const alert of claimed) sent += (await this.send(alert)) ? 1 : 0;
      if (claimed.length < BATCH) return sent;
    }
  }

  private async claim(): Promise<ClaimedAlert[]> {
    const now = this.wallNow();
    return rowsOf<ClaimedAlert>(
      await this.db.execute(sql`
        update billing.usage_alerts set next_notify_at = ${new Date(now.getTime() + CLAIM_MS).toISOString()}::timestamptz
        where id in (
          select id from billing.usage_alerts
          where notified_at is null and (next_notify_at is null or next_notify_at <= ${now.toISOString()}::timestamptz)
          order by triggered_at, id limit ${BATCH}
          for update skip locked)
        returning id, platform_id, meter, threshold_percent, quantity::text as quantity, included::text as included, notify_attempts`),
    );
  }

  private async send(alert: ClaimedAlert): Promise<boolean> {
    const [customer] = await this.db.select({ email: customers.email }).from(customers).where(eq(customers.platformId, alert.platform_id));
    if (!customer) {
      // a platform on free has no billing email: the alert stands in usage/alerts, there is nobody to mail
      await this.db.update(usageAlerts).set({ notifiedAt: this.wallNow() }).where(eq(usageAlerts.id, alert.id));
      return false;
    }
    const quantity = canonical(alert.quantity);
    const included = canonical(alert.included);
    try {
      await this.mailer.send({
        to: customer.email,
        subject: `Usage alert: ${alert.meter} reached ${alert.threshold_percent}% of what your plan includes`,
        text:
          `Platform ${alert.platform_id} has used ${quantity} ${alert.meter} this billing period: ${alert.threshold_percent}% of the ${included} its plan includes.\n` +
          (alert.threshold_percent >= 100 ? "Usage beyond what is included is invoiced at the plan's unit price when the period closes.\n" : "") +
          `\nUsage so far: ${this.billingUrl}/api/billing/usage/current?platformId=${encodeURIComponent(alert.platform_id)}\n`,
      });
    } catch (err) {
      const attempts = alert.notify_attempts + 1;
      const wait = Math.min(60_000 * 2 ** attempts, MAX_BACKOFF_MS);
      await this.db
        .update(usageAlerts)
        .set({ notifyAttempts: attempts, nextNotifyAt: new Date(this.wallNow().getTime() + wait) })
        .where(eq(usageAlerts.id, alert.id));
      // the error's text may quote the address: only its code is logged
      this.logger.warn({ alertId: alert.id, attempts, code: String((err as { code?: unknown }).code ?? "unknown") }, "usage alert mail failed; tried again later");
      return false;
    }
    await this.db.update(usageAlerts).set({ notifiedAt: this.wallNow() }).where(eq(usageAlerts.id, alert.id));
    return true;
  }
}
