import { sql, type SQL } from "drizzle-orm";
import { workerBacklogSource, type Clock, type JobBacklog, type ServiceMetrics } from "@core/kit";
import { rowsOf, type Db } from "@core/storage";
import type { BillingTime } from "./billing-time.js";
import { REMEMBER_MS } from "./metering/ingest.js";
import type { ChargeOutcome } from "./provider/types.js";

/** What a usage event is answered (DESIGN §6.5): one series of `core_billing_usage_events_total` each. */
const USAGE_RESULTS = ["accepted", "duplicate", "rejected"] as const;

/** Due items are counted up to this many per job: a count stays one short index scan however large the backlog. */
const COUNTED_UP_TO = 10_000;

/**
 * Billing's own metrics (DESIGN §10, docs/vault/cross-cutting/observability.md): counters of what
 * this process did (collection outcomes, usage events, webhook deliveries given up), and gauges
 * read from the database when /metrics is read: each worker job's backlog, payments in flight,
 * webhook deliveries pending and the mail outbox (`billing.mail_outbox`), one statement each.
 */
export class BillingMetrics {
  private readonly outcomes;
  private readonly usageEvents;
  private readonly webhooksGivenUp;

  constructor(
    readonly service: ServiceMetrics,
    db: Db,
    time: BillingTime,
    wallClock: Clock,
    usageGraceSeconds: number,
  ) {
    this.outcomes = service.counter("core_billing_collection_outcomes_total", "Payment attempts whose outcome collection learned (a charge's answer or a check's), by result", ["result"]);
    this.usageEvents = service.counter("core_billing_usage_events_total", "Usage events answered by POST /usage/events, by result", ["result"]);
    // each result's series is there at 0 before the first event: a rate of rejected to all is defined from the start
    for (const result of USAGE_RESULTS) this.usageEvents.inc({ result }, 0);
    this.webhooksGivenUp = service.counter("core_billing_webhook_deliveries_failed_total", "Webhook deliveries given up (failed after three days of retries, or their endpoint deleted)");
    service.addGaugeSource(workerBacklogSource("billing_worker", async () => workerBacklog(db, await time.now(), wallClock.now(), usageGraceSeconds)));
    service.addGaugeSource({
      name: "billing_outbox",
      gauges: [
        { name: "core_billing_collections_pending", help: "Invoices whose payment is in flight: sent to the provider, or its outcome unknown and checked until known" },
        { name: "core_billing_collection_oldest_pending_age_seconds", help: "How long the oldest payment in flight has been (0: none)" },
        { name: "core_billing_webhook_deliveries_pending", help: "Webhook deliveries not delivered yet, being retried or due" },
        { name: "core_billing_webhook_oldest_pending_age_seconds", help: "How long ago the oldest pending webhook delivery was written (0: none)" },
        { name: "core_billing_mail_outbox_pending", help: "Mails written to the mail outbox (receipts, payment failures, trials ending, usage alerts) and not sent yet" },
        { name: "core_billing_mail_oldest_pending_age_seconds", help: "How long ago the oldest unsent mail was written (0: none)" },
      ],
      read: async () => outboxGauges(db, await time.now(), wallClock.now()),
    });
  }

  /** One outcome of a payment attempt, as collection acts on it. */
  collectionOutcome(outcome: ChargeOutcome): void {
    this.outcomes.inc({ result: outcome.status });
  }

  /** What one batch of usage events was answered (`ingestBatch`, once it is committed). */
  usageBatch(answer: { accepted: number; duplicates: number; rejected: number }): void {
    this.usageEvents.inc({ result: "accepted" }, answer.accepted);
    this.usageEvents.inc({ result: "duplicate" }, answer.duplicates);
    this.usageEvents.inc({ result: "rejected" }, answer.rejected);
  }

  webhookGivenUp(): void {
    this.webhooksGivenUp.inc();
  }
}

const iso = (at: Date) => sql`${at.toISOString()}::timestamptz`;

/**
 * One job's backlog as a branch of the union: the items due, counted up to COUNTED_UP_TO in the
 * order of the job's index (`order`), and how long before `now` the earliest of them fell due (`at`).
 */
const backlogOf = (job: string, at: SQL, rest: SQL, now: Date, order: SQL | null = at) => sql`
  (select ${job}::text as job, count(*)::int as due, coalesce(extract(epoch from (${iso(now)} - min(at))), 0)::float8 as oldest
     from (select ${at} as at ${rest} ${order ? sql`order by ${order}` : sql``} limit ${COUNTED_UP_TO}) d)`;

/**
 * Every billing job's backlog in one statement (DESIGN §10): what falls due by its own time — the
 * test clock's billing time for periods and retries, the wall clock for checks, deliveries and mail —
 * whether or not an item backs off or another replica holds it. Each branch reads its job's index.
 */
export async function workerBacklog(db: Db, now: Date, wall: Date, usageGraceSeconds: number): Promise<JobBacklog[]> {
  const closeCutoff = new Date(now.getTime() - usageGraceSeconds * 1000);
  const retentionCutoff = new Date(now.getTime() - REMEMBER_MS);
  const branches = [
    backlogOf("renewals", sql`current_period_end`, sql`from billing.subscriptions where current and current_period_end <= ${iso(now)}`, now),
    backlogOf("payment_checks", sql`next_check_at`, sql`from billing.invoices where collection_state is not null and next_check_at <= ${iso(wall)}`, wall),
    backlogOf("dunning_retries", sql`next_attempt_at`, sql`from billing.invoices where status = 'open' and collection_state is null and next_attempt_at <= ${iso(now)}`, now),
    backlogOf("period_closes", sql`period_end`, sql`from billing.usage_periods where status = 'open' and period_end <= ${iso(closeCutoff)}`, closeCutoff),
    // a new delivery is due from the epoch (at once): it has been due since it was written
    backlogOf("webhook_deliveries", sql`case when attempts = 0 then created_at else next_attempt_at end`, sql`from billing.webhook_deliveries where status = 'pending' and next_attempt_at <= ${iso(wall)}`, wall, sql`next_attempt_at`),
    // a new mail is due when it is written (next_attempt_at = created_at), a failed one at its next try
    backlogOf("mail_outbox", sql`next_attempt_at`, sql`from billing.mail_outbox where sent_at is null and next_attempt_at <= ${iso(wall)}`, wall),
    // a BRIN index has no order: the age is the oldest among the events counted
    backlogOf("usage_retention", sql`occurred_at`, sql`from billing.usage_events where occurred_at < ${iso(retentionCutoff)}`, retentionCutoff, null),
    backlogOf("idempotency_pruning", sql`expires_at`, sql`from billing.idempotency_keys where expires_at < ${iso(wall)}`, wall),
  ];
  const rows = rowsOf<{ job: string; due: number; oldest: number | string }>(await db.execute(sql.join(branches, sql` union all `)));
  return rows.map((row) => ({ job: row.job, due: Number(row.due), oldestDueSeconds: Number(row.oldest) }));
}

/** Payments in flight, pending webhook deliveries and unsent mail, in one statement; a delivery is written at billing time `now`, a mail at wall-clock time. */
async function outboxGauges(db: Db, now: Date, wall: Date) {
  const [row] = rowsOf<{ collections: number; collection_since: Date | string | null; deliveries: number; delivery_since: Date | string | null; mail: number; mail_since: Date | string | null }>(
    await db.execute(sql`select
      (select count(*)::int from billing.invoices where collection_state is not null) as collections,
      (select min(collection_since) from billing.invoices where collection_state is not null) as collection_since,
      (select count(*)::int from billing.webhook_deliveries where status = 'pending') as deliveries,
      (select min(created_at) from billing.webhook_deliveries where status = 'pending') as delivery_since,
      (select count(*)::int from billing.mail_outbox where sent_at is null) as mail,
      (select min(created_at) from billing.mail_outbox where sent_at is null) as mail_since`),
  );
  const ageOf = (since: Date | string | null | undefined, at: Date) => (since ? Math.max(0, (at.getTime() - new Date(since).getTime()) / 1000) : 0);
  const gauge = (value: number) => [{ labels: {}, value }];
  return {
    core_billing_collections_pending: gauge(Number(row?.collections ?? 0)),
    core_billing_collection_oldest_pending_age_seconds: gauge(ageOf(row?.collection_since, wall)),
    core_billing_webhook_deliveries_pending: gauge(Number(row?.deliveries ?? 0)),
    core_billing_webhook_oldest_pending_age_seconds: gauge(ageOf(row?.delivery_since, now)),
    core_billing_mail_outbox_pending: gauge(Number(row?.mail ?? 0)),
    core_billing_mail_oldest_pending_age_seconds: gauge(ageOf(row?.mail_since, wall)),
  };
}
