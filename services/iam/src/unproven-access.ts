import { serialize } from "hono/utils/cookie";
import type { AuditLog } from "./audit.js";
import type { Mailer } from "@core/kit";

/** What the auth library took from an account whose address was never proven, during one request. */
export interface RevokedAccess {
  userId: string;
  /** the password (the library's `credential` account) was deleted */
  password: boolean;
  /** other sign-in links (social accounts) deleted */
  otherAccounts: number;
  /** sessions signed out, the CLI's device logins among them */
  sessions: number;
}

/** The page notice a browser carries to the page it lands on after the revocation. */
export const REVOKED_NOTICE_COOKIE = "core_notice";
export const REVOKED_NOTICE = "unproven-access-revoked";

/**
 * better-auth strips the password and sessions of an unverified account when someone proves the
 * address with a magic link (its "revoke unproven credentials" protection: whoever set them may not
 * own the mailbox). It says nothing about it, so its database hooks note what goes, per request,
 * and IAM tells the owner afterwards (issue 10 §3): on the page, by mail and in the audit log.
 */
export class UnprovenAccessRevocations {
  private readonly pending = new Map<string, RevokedAccess>();

  private entry(requestId: string, userId: string): RevokedAccess {
    let entry = this.pending.get(requestId);
    if (!entry) this.pending.set(requestId, (entry = { userId, password: false, otherAccounts: 0, sessions: 0 }));
    return entry;
  }

  noteAccount(requestId: string, userId: string, providerId: string): void {
    const entry = this.entry(requestId, userId);
    if (providerId === "credential") entry.password = true;
    else entry.otherAccounts++;
  }

  noteSession(requestId: string, userId: string): void {
    this.entry(requestId, userId).sessions++;
  }

  /** Whose access was revoked during the request (so far), without taking it; null when nobody's. */
  peek(requestId: string): string | null {
    return this.pending.get(requestId)?.userId ?? null;
  }

  /** What was revoked during the request, once; null when nothing was. */
  take(requestId: string): RevokedAccess | null {
    const entry = this.pending.get(requestId) ?? null;
    this.pending.delete(requestId);
    return entry;
  }
}

export function revokedAccessMail(iamUrl: string, email: string, revoked: RevokedAccess) {
  const removed = [
    revoked.password ? "the password of the account" : null,
    revoked.otherAccounts > 0 ? `${revoked.otherAccounts} other sign-in method${revoked.otherAccounts === 1 ? "" : "s"}` : null,
    revoked.sessions > 0 ? `${revoked.sessions} signed-in session${revoked.sessions === 1 ? "" : "s"} (command-line logins included)` : null,
  ].filter(Boolean);
  return {
    to: email,
    subject: "Your Core account: the password and other sessions were removed",
    text:
      `Someone signed in to Core with a link sent to ${email}, before this address had been confirmed.\n\n` +
      `To make sure nobody else keeps a way into the account, we removed ${removed.join(", ")}. ` +
      "Your address is confirmed now.\n\n" +
      `If the password was yours, set a new one: ${iamUrl}/forgot-password\n` +
      `Review your sessions and keys at ${iamUrl}/account\n\n` +
      "If you did not sign in just now, set a new password at once and revoke any session you do not know.\n",
  };
}

/** The cookie that carries the notice to the page a browser lands on (read once by the pages). */
export const revokedNoticeCookie = (secure: boolean) =>
  serialize(REVOKED_NOTICE_COOKIE, REVOKED_NOTICE, { path: "/", httpOnly: true, sameSite: "Lax", secure, maxAge: 300 });

/** Tells the owner what was revoked: an audit record and a mail (the page notice is revokedNoticeCookie). */
export async function tellOwnerOfRevokedAccess(
  deps: { audit: AuditLog; mailer: Mailer; iamUrl: string; forgetPrincipals: () => void },
  revoked: RevokedAccess,
  email: string | null,
  actor: { ip: string; userAgent: string | null; requestId: string },
): Promise<void> {
  // the revoked sessions must stop working at once, on IAM too
  deps.forgetPrincipals();
  await deps.audit.record({
    action: "auth.unproven_access_revoked",
    outcome: "success",
    actorType: "user",
    actorId: revoked.userId,
    targetType: "user",
    targetId: revoked.userId,
    ...actor,
    metadata: { passwordRemoved: revoked.password, otherAccountsRemoved: revoked.otherAccounts, sessionsRevoked: revoked.sessions },
  });
  if (email) await deps.mailer.send(revokedAccessMail(deps.iamUrl, email, revoked));
}
