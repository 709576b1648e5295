import { sql, type SQL } from "drizzle-orm";
import { newId } from "@core/kit";
import { rowsOf, type Db } from "@core/storage";
import type { WebhookTables } from "./tables.js";

/**
 * Whether an endpoint whose `events` is `types` takes an event of `type`: every event when null;
 * else an entry naming the type exactly, or a prefix ending in `.*` (`audit.auth.*` takes
 * `audit.auth.sign_in`), so a service whose event types grow (IAM's audit actions) needs no list.
 * Billing's SQL writer (`billing.emit_webhook_event`) matches exact types only; its endpoints can
 * name nothing else.
 */
export function takesEventType(endpoints: WebhookTables["webhookEndpoints"], type: string): SQL {
  return sql`(${endpoints.events} is null or ${type} = any(${endpoints.events})
    or exists (select 1 from unnest(${endpoints.events}) as pattern where right(pattern, 2) = '.*' and starts_with(${type}, left(pattern, -1))))`;
}

/**
 * Writes an event to a service's outbox in the caller's transaction (DESIGN §6.8, ADR 0027), with a
 * pending delivery for every enabled endpoint that takes its type and meets `scope` (IAM: the
 * endpoint's organization is the event's, or it has none), in one statement. No endpoint takes
 * it: nothing is written, and the answer is null; else the event's id. Deliveries are due at once
 * (`next_attempt_at` is the epoch: the dispatcher compares it with wall-clock time), as billing's
 * SQL writer makes them.
 */
export async function emitWebhookEvent(db: Db, tables: WebhookTables, event: { type: string; data: Record<string, unknown>; at: Date }, scope?: SQL): Promise<string | null> {
  const { webhookEndpoints, webhookEvents, webhookDeliveries } = tables;
  const id = newId("evt");
  const at = event.at.toISOString();
  const rows = rowsOf<{ event_id: string }>(
    await db.execute(sql`
      with targets as (
        select ${webhookEndpoints.id} as endpoint_id from ${webhookEndpoints}
         where ${webhookEndpoints.disabledAt} is null and ${takesEventType(webhookEndpoints, event.type)} and ${scope ?? sql`true`}
      ), written as (
        insert into ${webhookEvents} (id, type, data, created_at)
        select ${id}, ${event.type}, ${JSON.stringify(event.data)}::jsonb, ${at}::timestamptz where exists (select 1 from targets)
        returning id
      )
      insert into ${webhookDeliveries} (id, event_id, endpoint_id, status, next_attempt_at, created_at)
      select 'whd_' || replace(gen_random_uuid()::text, '-', ''), written.id, targets.endpoint_id, 'pending', 'epoch'::timestamptz, ${at}::timestamptz
        from written cross join targets
      returning event_id`),
  );
  return rows.length > 0 ? id : null;
}
