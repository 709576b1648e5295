import { eq, isNull, or } from "drizzle-orm";
import { loggableError, type Clock, type Logger } from "@core/kit";
import type { Db } from "@core/storage";
import { emitWebhookEvent, WebhookDispatcher, type EndpointStore, type WebhookTables } from "@core/webhooks";
import type { AuditEvent } from "./audit.js";
import { auditAttempts, auditDeliveries, auditEndpoints, auditOutbox } from "./db/schema.js";

/**
 * The audit log streamed out (ADR 0027): every audit event, as the audit API answers it, goes to
 * each endpoint that takes it, signed, retried and recorded exactly as billing's webhooks are
 * (DESIGN §6.8), by the same code (packages/webhooks) over IAM's own tables.
 */

/** IAM's webhook tables as the shared code takes them (the endpoints' `org_id` is IAM's own column, which the shared code never reads). */
export const auditWebhookTables = { webhookEndpoints: auditEndpoints, webhookEvents: auditOutbox, webhookDeliveries: auditDeliveries, webhookAttempts: auditAttempts } as unknown as WebhookTables;

/** Private addresses are reached only with this setting (named in refusals and in failed attempts' answers). */
export const ALLOW_PRIVATE_SETTING = "CORE_IAM_WEBHOOK_ALLOW_PRIVATE";

/**
 * An audit event as `GET /api/audit/events` answers it and as every delivery carries it in `data`:
 * the one definition of both. The client address and user agent go out too: they are what a
 * security team's own systems look at first (where a sign-in came from), and whoever registers an
 * endpoint can already read them from the audit API (operators everything; an owner, who holds
 * audit:read, their organization's events).
 */
export function auditEventJson(event: AuditEvent) {
  return {
    id: event.id,
    at: event.at,
    action: event.action,
    outcome: event.outcome,
    actorType: event.actorType,
    actorId: event.actorId,
    orgId: event.orgId,
    targetType: event.targetType,
    targetId: event.targetId,
    ip: event.ip,
    userAgent: event.userAgent,
    requestId: event.requestId,
    metadata: event.metadata ?? null,
  };
}

/** The webhook event type of an audit action: `audit.<action>` (`audit.auth.sign_in`); any action, no list to keep. */
export const auditEventType = (action: string) => `audit.${action}`;

/** The endpoints an event of `orgId` may go to: operators' (no organization) and that organization's. */
const endpointsOf = (orgId: string | null) => (orgId ? or(isNull(auditEndpoints.orgId), eq(auditEndpoints.orgId, orgId)) : isNull(auditEndpoints.orgId));

/**
 * Writes a just-recorded audit event to the outbox, in the audit write's transaction, with a
 * delivery for each endpoint that takes it. It runs in a savepoint and never throws: a failure here
 * is logged (never the event) and the audit event is still written, since recording it matters
 * more than streaming it.
 */
export async function streamAuditEvent(tx: Db, event: AuditEvent, logger: Logger): Promise<void> {
  try {
    await tx.transaction((savepoint) =>
      emitWebhookEvent(savepoint, auditWebhookTables, { type: auditEventType(event.action), data: auditEventJson(event), at: new Date(event.at * 1000) }, endpointsOf(event.orgId)),
    );
  } catch (err) {
    logger.error({ action: event.action, err: loggableError(err) }, "audit event not written to the webhook outbox");
  }
}

/** IAM's endpoint store for the shared endpoint operations; `orgId` scopes it to one organization's endpoints. */
export function auditEndpointStore(db: Db, orgId?: string): EndpointStore {
  return { db, tables: auditWebhookTables, service: "IAM", allowPrivateSetting: ALLOW_PRIVATE_SETTING, ...(orgId && { scope: eq(auditEndpoints.orgId, orgId) }) };
}

/** The dispatcher of IAM's deliveries: every replica runs one (index.ts); its lease keeps two from sending one attempt. */
export function auditDispatcher(db: Db, clock: Clock, logger: Logger, options: { allowPrivate: boolean; timeoutMs?: number; resolve?: (hostname: string) => Promise<string[]> }) {
  return new WebhookDispatcher(db, auditWebhookTables, { service: "iam", allowPrivateSetting: ALLOW_PRIVATE_SETTING }, clock, logger, options);
}
