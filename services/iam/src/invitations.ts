import { and, eq, gt, lte, sql } from "drizzle-orm";
import { conflict, type ApiError } from "@core/kit";
import { isUniqueViolation, type Db } from "@core/storage";
import { invitation } from "./db/schema.js";

/**
 * One pending invitation per organization and address (docs/vault/services/iam.md#Invitations) is
 * held by a unique index (`invitation_pending_unique`, migration 0007_security_invariants) over the organization and the
 * address in lower case, among pending rows: IAM's route and the auth library's `invite-member` both
 * insert, and of invitations sent at once exactly one is made. A check before the insert cannot do
 * this: every request of a burst finds no invitation yet.
 */
export const PENDING_INVITATION_INDEX = "invitation_pending_unique";

/** Whether `err` is that index refusing a second pending invitation of one address. */
export const isSecondPendingInvitation = (err: unknown): boolean => isUniqueViolation(err, PENDING_INVITATION_INDEX);

const sameAddress = (email: string) => sql`lower(${invitation.email}) = ${email.toLowerCase()}`;

/**
 * Marks the pending invitations of `email` to `orgId` that lapsed by `now` as `expired`. The index
 * cannot read the time, so a lapsed invitation still pending would refuse a new one; every path that
 * makes an invitation calls this first. (The library leaves lapsed invitations pending; IAM's answers
 * show them as expired either way.)
 */
export async function expireLapsedInvitations(db: Db, orgId: string, email: string, now: Date): Promise<void> {
  await db
    .update(invitation)
    .set({ status: "expired" })
    .where(and(eq(invitation.organizationId, orgId), sameAddress(email), eq(invitation.status, "pending"), lte(invitation.expiresAt, now)));
}

export type InvitationRow = typeof invitation.$inferSelect;

/**
 * A new pending invitation, or 409 INVITATION_EXISTS naming the one that is pending already (also
 * when another request made it a moment before, in a race the index settles).
 */
export async function createPendingInvitation(db: Db, values: Omit<InvitationRow, "status">, now: Date): Promise<InvitationRow> {
  await expireLapsedInvitations(db, values.organizationId, values.email, now);
  try {
    const [row] = await db
      .insert(invitation)
      .values({ ...values, status: "pending" })
      .returning();
    return row!;
  } catch (err) {
    if (isSecondPendingInvitation(err)) throw await invitationExists(db, values.organizationId, values.email, now);
    throw err;
  }
}

async function invitationExists(db: Db, orgId: string, email: string, now: Date): Promise<ApiError> {
  const [pending] = await db
    .select({ id: invitation.id })
    .from(invitation)
    .where(and(eq(invitation.organizationId, orgId), sameAddress(email), eq(invitation.status, "pending"), gt(invitation.expiresAt, now)));
  return conflict("INVITATION_EXISTS", `${email} has a pending invitation already${pending ? ` (${pending.id})` : ""}`);
}

/** An invitation's state as IAM's answers show it: a pending one whose time has passed has expired. */
export const invitationStatus = (row: Pick<InvitationRow, "status" | "expiresAt">, now: Date): string =>
  row.status === "pending" && row.expiresAt <= now ? "expired" : row.status;
