import { and, desc, eq, gte, lt, lte, or, type SQL } from "drizzle-orm";
import { decodeCursor, newId, toPage, unixSeconds, type Clock, type Logger } from "@core/kit";
import type { Db } from "@core/storage";
import { auditEvents } from "./db/schema.js";

/** Actions written to the audit log (DESIGN §4). */
export type AuditAction =
  | "auth.sign_up"
  | "auth.sign_in"
  | "auth.sign_out"
  | "auth.magic_link.request"
  | "auth.magic_link.verify"
  | "auth.rate_limited"
  | "session.revoke"
  | "role.upsert"
  | "role.delete"
  | "grant.create"
  | "grant.delete"
  | "organization.create"
  | "organization.setup"
  | "organization.bootstrap"
  | "organization.library_action"
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
  | "token.revoke";

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

export type AuditEvent = typeof auditEvents.$inferSelect;

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
      await this.db.insert(auditEvents).values({
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
      });
    } catch (err) {
      this.logger.error({ action: event.action, err: (err as Error).message }, "audit write failed");
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
    // newest first: the next page holds rows strictly before the last one shown
    const from = decodeCursor(filter.cursor);
    if (from) {
      const k = Number(from.k);
      conditions.push(or(lt(auditEvents.at, k), and(eq(auditEvents.at, k), lt(auditEvents.id, from.id))));
    }
    const rows = await this.db
      .select()
      .from(auditEvents)
      .where(and(...conditions))
      .orderBy(desc(auditEvents.at), desc(auditEvents.id))
      .limit(filter.limit + 1);
    return toPage(rows, filter.limit, (r) => ({ k: r.at, id: r.id }));
  }

  async find(id: string): Promise<AuditEvent | undefined> {
    const [row] = await this.db.select().from(auditEvents).where(eq(auditEvents.id, id));
    return row;
  }
}
