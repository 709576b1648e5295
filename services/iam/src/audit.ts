import { and, eq, gte, lte, type SQL } from "drizzle-orm";
import { decodeCursor, loggableError, newId, toPage, unixSeconds, type Clock, type Logger } from "@core/kit";
import { keysetAfter, keysetOrder, type Db, type KeysetColumns } from "@core/storage";
import { auditEvents } from "./db/schema.js";
import { streamAuditEvent } from "./audit-stream.js";

/** Actions written to the audit log (DESIGN §4). */
export type AuditAction =
  | "auth.sign_up"
  | "auth.sign_in"
  | "auth.sign_out"
  | "auth.magic_link.request"
  | "auth.magic_link.verify"
  | "auth.rate_limited"
  | "auth.email_verification.request"
  | "auth.email_verify"
  | "auth.password_reset.request"
  | "auth.password_reset"
  | "auth.password_change"
  | "auth.unproven_access_revoked"
  | "auth.passkey_sign_in"
  | "passkey.add"
  | "passkey.rename"
  | "passkey.remove"
  | "session.revoke"
  | "role.upsert"
  | "role.delete"
  | "grant.create"
  | "grant.delete"
  | "organization.create"
  | "organization.setup"
  | "organization.bootstrap"
  | "organization.library_action"
  | "organization.last_manager_refused"
  | "invitation.create"
  | "invitation.revoke"
  | "apikey.create"
  | "apikey.delete"
  | "apikey.validate"
  | "service_token.issue"
  | "platform.status"
  | "profile.update"
  | "device.start"
  | "device.approve"
  | "device.deny"
  | "device.token"
  | "token.refresh"
  | "token.refresh_reuse"
  | "token.revoke"
  | "audit_endpoint.create"
  | "audit_endpoint.delete"
  | "audit_endpoint.rotate_secret"
  | "auth.sso.start"
  | "auth.sso.sign_in"
  | "sso.provider.create"
  | "sso.provider.update"
  | "sso.provider.delete"
  | "sso.provider.approve"
  | "auth.two_factor.enrol"
  | "auth.two_factor.enable"
  | "auth.two_factor.disable"
  | "auth.two_factor.verify"
  | "auth.two_factor.backup_code"
  | "auth.two_factor.backup_codes_regenerate"
  | "auth.two_factor.secret_view"
  | "policy.update"
  | "oauth.client.register"
  | "oauth.consent"
  | "oauth.token";

export interface AuditInput {
  action: AuditAction;
  outcome: "success" | "failure";
  actorType: "user" | "apikey" | "service" | "anonymous" | "system";
  actorId?: string | null;
  orgId?: string | null;
  targetType?: string | null;
  targetId?: string | null;
  ip?: string | null;
  userAgent?: string | null;
  requestId?: string | null;
  metadata?: Record<string, unknown> | null;
}

export type AuditEvent = Omit<typeof auditEvents.$inferSelect, "seq">;

/** Newest first: by second, then by insertion within the second (a stable tie-break). */
const NEWEST_FIRST: KeysetColumns = { key: auditEvents.at, tie: auditEvents.seq, direction: "desc" };
/** The insertion sequence orders pages; it is not part of an event. */
const withoutSeq = ({ seq: _, ...event }: typeof auditEvents.$inferSelect): AuditEvent => event;

/**
 * The audit log. Writing never fails the request that is being audited: a failed write is logged
 * (without the event's metadata) and the request goes on.
 */
export class AuditLog {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {}

  async record(event: AuditInput): Promise<void> {
    try {
      // the event and its deliveries to audit endpoints in one transaction (audit-stream.ts): streamed at least once
      await this.db.transaction(async (tx) => {
        const [row] = await tx.insert(auditEvents).values({
          id: newId("aud"),
          at: unixSeconds(this.clock.now()),
          action: event.action,
          outcome: event.outcome,
          actorType: event.actorType,
          actorId: event.actorId ?? null,
          orgId: event.orgId ?? null,
          targetType: event.targetType ?? null,
          targetId: event.targetId ?? null,
          ip: event.ip ?? null,
          userAgent: event.userAgent?.slice(0, 512) ?? null,
          requestId: event.requestId ?? null,
          metadata: event.metadata ?? null,
        }).returning();
        await streamAuditEvent(tx, withoutSeq(row!), this.logger);
      });
    } catch (err) {
      // the failed statement's parameters are the event itself (emails, addresses): never logged
      this.logger.error({ action: event.action, err: loggableError(err) }, "audit write failed");
    }
  }

  async list(filter: {
    orgId?: string;
    actorId?: string;
    action?: string;
    since?: number;
    until?: number;
    cursor?: string;
    limit: number;
  }) {
    const conditions: (SQL | undefined)[] = [
      filter.orgId ? eq(auditEvents.orgId, filter.orgId) : undefined,
      filter.actorId ? eq(auditEvents.actorId, filter.actorId) : undefined,
      filter.action ? eq(auditEvents.action, filter.action) : undefined,
      filter.since !== undefined ? gte(auditEvents.at, filter.since) : undefined,
      filter.until !== undefined ? lte(auditEvents.at, filter.until) : undefined,
    ];
    conditions.push(keysetAfter(NEWEST_FIRST, decodeCursor(filter.cursor, { key: "seconds", tie: "sequence" })));
    const rows = await this.db
      .select()
      .from(auditEvents)
      .where(and(...conditions))
      .orderBy(...keysetOrder(NEWEST_FIRST))
      .limit(filter.limit + 1);
    const page = toPage(rows, filter.limit, (r) => ({ k: r.at, id: r.seq }));
    return { data: page.data.map(withoutSeq), cursor: page.cursor };
  }

  async find(id: string): Promise<AuditEvent | undefined> {
    const [row] = await this.db.select().from(auditEvents).where(eq(auditEvents.id, id));
    return row && withoutSeq(row);
  }
}
