import { sql } from "drizzle-orm";
import { rowsOf, type Db } from "@core/storage";

/** The events billing sends (DESIGN §6.8), in the order an operator reads about them. */
export const EVENT_TYPES = [
  "subscription.created",
  "subscription.updated",
  "subscription.canceled",
  "subscription.trial_will_end",
  "invoice.finalized",
  "invoice.paid",
  "invoice.payment_failed",
  "invoice.payment_pending",
  "invoice.marked_uncollectible",
  "invoice.voided",
  "invoice.disputed",
  "credit_note.created",
  "usage.threshold_reached",
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

/**
 * Writes an event to the outbox in the caller's transaction, with a pending delivery for each
 * endpoint that takes it (`billing.emit_webhook_event`, the one writer: the subscription and usage
 * alert triggers call it too). `at` is billing time.
 */
export async function emitEvent(tx: Db, type: EventType, data: Record<string, unknown>, at: Date): Promise<void> {
  await tx.execute(sql`select billing.emit_webhook_event(${type}, ${JSON.stringify(data)}::jsonb, ${at.toISOString()}::timestamptz)`);
}

/** Whether any endpoint takes `type`: an event whose data costs a query is only built when one does. */
export async function eventWanted(tx: Db, type: EventType): Promise<boolean> {
  const [row] = rowsOf<{ wanted: boolean }>(await tx.execute(sql`select billing.webhook_wanted(${type}) as wanted`));
  return row?.wanted === true;
}
