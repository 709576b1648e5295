import { sql } from "drizzle-orm";
import { isUnreachable } from "@core/kit";
import type { Db } from "@core/storage";

/** How long a client is told to wait while a dependency is down (the kit's JSON answers say the same). */
export const OUTAGE_RETRY_SECONDS = 5;

/**
 * Whether a failure happened because a dependency is down: the error says so (the kit's
 * isUnreachable), or the database does not answer now. The auth library turns some of its
 * database failures into a bare 500 without their cause; asking the database tells them apart
 * from a bug.
 */
export async function isOutage(db: Db, err?: unknown): Promise<boolean> {
  if (err !== undefined && isUnreachable(err)) return true;
  try {
    await db.execute(sql`select 1`);
    return false;
  } catch (probe) {
    return isUnreachable(probe) !== null;
  }
}
