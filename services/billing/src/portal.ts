import { randomBytes } from "node:crypto";
import { and, eq, gt } from "drizzle-orm";
import type { Db } from "@core/storage";
import { portalSessions } from "./db/schema.js";

/** A portal session lasts an hour (DESIGN §6.1), on the wall clock: the test clock never ends one. */
export const PORTAL_SESSION_MS = 3_600_000;

export type PortalSession = typeof portalSessions.$inferSelect;

/**
 * A customer portal session (DESIGN §6.1): its id is the bearer of the portal's pages, so it is 32
 * random bytes, and it is bound to one customer and platform.
 */
export async function createPortalSession(db: Db, now: Date, input: { customerId: string; platformId: string; returnUrl: string }): Promise<PortalSession> {
  const [row] = await db
    .insert(portalSessions)
    .values({
      id: `bps_${randomBytes(32).toString("base64url")}`,
      customerId: input.customerId,
      platformId: input.platformId,
      returnUrl: input.returnUrl,
      createdAt: now,
      expiresAt: new Date(now.getTime() + PORTAL_SESSION_MS),
    })
    .returning();
  return row!;
}

/** The session of a portal link that has not expired, or null. */
export async function livePortalSession(db: Db, id: string, now: Date): Promise<PortalSession | null> {
  if (!/^bps_[A-Za-z0-9_-]{43}$/.test(id)) return null;
  const [row] = await db
    .select()
    .from(portalSessions)
    .where(and(eq(portalSessions.id, id), gt(portalSessions.expiresAt, now)));
  return row ?? null;
}
