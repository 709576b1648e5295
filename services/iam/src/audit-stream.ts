import { eq, inArray, isNull, or, type SQL } from "drizzle-orm";
import { loggableError, type Clock, type Logger } from "@core/kit";
import type { Db } from "@core/storage";
import { emitWebhookEvent, WebhookDispatcher, type EndpointStore, type WebhookTables } from "@core/webhooks";
import type { AuditEvent } from "./audit.js";
import { auditAttempts, auditDeliveries, auditEndpoints, auditOutbox, member, user } from "./db/schema.js";

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

/**
 * The endpoints an event may go to: operators' (no organization) always; an organization's when the
 * event is in it; and, for an event in no organization about a person (their sign-ins and failed
 * sign-ins, second factors, passkeys, sessions), each organization that person is a member of: an
 * organization's security team watches its members' accounts, as the "sign-ins" asks. A
 * failed sign-in names the address tried (the target), a person acting names themselves (the actor).
 */
function endpointsOf(tx: Db, event: AuditEvent): SQL {
  const operators = isNull(auditEndpoints.orgId);
  if (event.orgId) return or(operators, eq(auditEndpoints.orgId, event.orgId))!;
  if (event.actorType === "user" && event.actorId) {
    return or(operators, inArray(auditEndpoints.orgId, tx.select({ orgId: member.organizationId }).from(member).where(eq(member.userId, event.actorId))))!;
  }
  if (event.targetType === "email" && event.targetId) {
    const theirs = tx.select({ orgId: member.organizationId }).from(member).innerJoin(user, eq(user.id, member.userId)).where(eq(user.email, event.targetId));
    return or(operators, inArray(auditEndpoints.orgId, theirs))!;
  }
  return operators;
}

/**
 * Writes a just-recorded audit event to the outbox, in the audit write's transaction, with a
 * delivery for each endpoint that takes it. It runs in a savepoint and never throws: a failure here
 * is logged (never the event) and the audit event is still written, since recording it matters
 * more than streaming it.
 */
export async function streamAuditEvent(tx: Db, event: AuditEvent, logger: Logger): Promise<void> {
  try {
    await tx.transaction((savepoint) =>
      emitWebhookEvent(savepoint, auditWebhookTables, { type: auditEventType(event.action), data: auditEventJson(event), at: new Date(event.at * 1000) }, endpointsOf(savepoint, event)),
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
