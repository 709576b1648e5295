import { sql } from "drizzle-orm";
import { rowsOf, type Db } from "@core/storage";
import { enqueueMail } from "../mail/outbox.js";

/** A threshold an ingestion crossed, as it wrote it. */
export interface RaisedAlert {
  id: string;
  platformId: string;
  meter: string;
  thresholdPercent: number;
  /** the period's total after the batch, a canonical decimal string */
  quantity: string;
  /** what the plan includes, a canonical decimal string */
  included: string;
}

/**
 * Mails each usage alert to the platform's billing email (DESIGN §6.5): written to billing's mail
 * outbox in the ingestion's transaction, once per alert, and sent by the outbox's drainer after the
 * commit, so a crash never loses one. A platform with no customer (it never upgraded) has no
 * billing email: the alert stands in `usage/alerts` and nobody is mailed.
 */
export async function mailUsageAlerts(tx: Db, billingUrl: string, alerts: RaisedAlert[], wall: Date): Promise<void> {
  if (alerts.length === 0) return;
  const platformIds = [...new Set(alerts.map((a) => a.platformId))].sort();
  const emails = new Map(
    rowsOf<{ platform_id: string; email: string }>(
      await tx.execute(sql`select platform_id, email from billing.customers where platform_id in (${sql.join(platformIds.map((id) => sql`${id}`), sql`, `)})`),
    ).map((row) => [row.platform_id, row.email]),
  );
  for (const alert of alerts) {
    const to = emails.get(alert.platformId);
    if (!to) continue;
    await enqueueMail(
      tx,
      {
        kind: "usage_alert",
        dedupeKey: `usage_alert:${alert.id}`,
        to,
        subject: `Usage alert: ${alert.meter} reached ${alert.thresholdPercent}% of what your plan includes`,
        text:
          `Platform ${alert.platformId} has used ${alert.quantity} ${alert.meter} this billing period: ${alert.thresholdPercent}% of the ${alert.included} its plan includes.\n` +
          (alert.thresholdPercent >= 100 ? "Usage beyond what is included is invoiced at the plan's unit price when the period closes.\n" : "") +
          `\nUsage so far: ${billingUrl}/api/billing/usage/current?platformId=${encodeURIComponent(alert.platformId)}\n`,
      },
      wall,
    );
  }
}
