import { and, desc, eq, gt, sql } from "drizzle-orm";
import type { Db } from "@core/storage";
import { invitation, organization, user } from "./db/schema.js";
import { invitationStatus } from "./invitations.js";

/** An invitation as its pages show it: to what, from whom, with which role, and where it stands. */
export interface InvitationView {
  id: string;
  email: string;
  role: string;
  status: "pending" | "accepted" | "rejected" | "canceled" | "expired";
  expiresAt: Date;
  organization: { id: string; name: string; slug: string };
  inviter: { name: string; email: string };
}

const columns = {
  id: invitation.id,
  email: invitation.email,
  role: invitation.role,
  status: invitation.status,
  expiresAt: invitation.expiresAt,
  orgId: organization.id,
  orgName: organization.name,
  orgSlug: organization.slug,
  inviterName: user.name,
  inviterEmail: user.email,
};

interface Row {
  id: string;
  email: string;
  role: string | null;
  status: string;
  expiresAt: Date;
  orgId: string;
  orgName: string;
  orgSlug: string;
  inviterName: string;
  inviterEmail: string;
}

function viewOf(row: Row, now: Date): InvitationView {
  const known = ["pending", "accepted", "rejected", "canceled", "expired"] as const;
  // the library leaves a lapsed invitation pending; to a person it has expired
  const shown = invitationStatus(row, now);
  const status = known.find((s) => s === shown) ?? "canceled";
  return {
    id: row.id,
    email: row.email,
    role: row.role ?? "member",
    status,
    expiresAt: row.expiresAt,
    organization: { id: row.orgId, name: row.orgName, slug: row.orgSlug },
    inviter: { name: row.inviterName, email: row.inviterEmail },
  };
}

const selectViews = (db: Db) =>
  db.select(columns).from(invitation).innerJoin(organization, eq(organization.id, invitation.organizationId)).innerJoin(user, eq(user.id, invitation.inviterId));

/** One invitation by id, whatever its state; null when there is none. */
export async function invitationById(db: Db, id: string, now: Date): Promise<InvitationView | null> {
  const [row] = await selectViews(db).where(eq(invitation.id, id));
  return row ? viewOf(row, now) : null;
}

/** The invitations waiting for this address (pending, unexpired), newest first: the account and onboarding pages list them. */
export async function pendingInvitationsFor(db: Db, email: string, now: Date): Promise<InvitationView[]> {
  const rows = await selectViews(db)
    .where(and(sql`lower(${invitation.email}) = ${email.toLowerCase()}`, eq(invitation.status, "pending"), gt(invitation.expiresAt, now)))
    .orderBy(desc(invitation.createdAt))
    .limit(50);
  return rows.map((row) => viewOf(row, now));
}
