import { and, eq, inArray, isNull, ne, notInArray, or } from "drizzle-orm";
import type { Clock } from "@core/kit";
import type { Db } from "@core/storage";
import { deviceCodes, oauthRefreshToken, refreshTokens, session } from "./db/schema.js";

/**
 * Ending a session ends everything made through it (docs/vault/cross-cutting/security.md, "ending a
 * session"). What a session makes that outlives a request:
 * - CLI logins: a refresh family is issued with its own access sessions (`refresh_tokens.session_id`)
 *   and was approved by a browser session (`made_by_session_id`); ending any of those sessions ends
 *   the family, every access session issued in it, and what those made in turn;
 * - MCP clients' OAuth refresh tokens, issued through the session that consented
 *   (`oauth_refresh_token.session_id`; their access tokens are JWTs of 10 minutes and end with time).
 *
 * Every path that ends a session comes here: `DELETE /api/sessions/{id}`, the account page's revoke
 * and "sign out other sessions", the CLI's RFC 7009 revocation and a refresh token's reuse, and,
 * through the library's session hook, sign-out, the library's revoke routes, a password change or
 * reset and the session replacements of two-factor enrolment. Set-based: a handful of statements in
 * one transaction, however many sessions end.
 */
export class SessionRevocation {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    /** drops this process's cached principals: a revoked session stops working here at once */
    private readonly forgetPrincipals: () => void,
  ) {}

  /**
   * Ends the sessions `ids` and everything made through them; the ids of the sessions deleted here
   * (a session the library deleted already is not among them, what it made is).
   */
  async revoke(ids: string[]): Promise<string[]> {
    if (ids.length === 0) return [];
    const ended = await this.db.transaction((tx) => endWithWhatTheyMade(tx, ids, this.clock.now()));
    this.forgetPrincipals();
    return ended;
  }

  /**
   * The library replaced a session with a new one of the same person in the same request (two-factor
   * turned on or off: the token changes, the person and the browser stay): what the old one made
   * now hangs on the new one, rather than ending with it.
   */
  async handOver(from: string, to: string): Promise<void> {
    await this.db.transaction(async (tx) => {
      await tx.update(refreshTokens).set({ madeBySessionId: to }).where(eq(refreshTokens.madeBySessionId, from));
      await tx.update(refreshTokens).set({ sessionId: to }).where(eq(refreshTokens.sessionId, from));
      await tx.update(oauthRefreshToken).set({ sessionId: to }).where(and(eq(oauthRefreshToken.sessionId, from), isNull(oauthRefreshToken.revoked)));
      // a CLI login it approved and the CLI has yet to collect (DeviceFlow.poll), with the strength it was approved with
      await tx.update(deviceCodes).set({ approvedBySessionId: to }).where(and(eq(deviceCodes.approvedBySessionId, from), eq(deviceCodes.status, "approved")));
    });
    this.forgetPrincipals();
  }

  /** Ends one of a user's sessions (`revoke`); null when it is not theirs, or not there. */
  async revokeOwn(userId: string, id: string): Promise<string[] | null> {
    const [own] = await this.db.select({ id: session.id }).from(session).where(and(eq(session.id, id), eq(session.userId, userId)));
    return own ? this.revoke([own.id]) : null;
  }

  /**
   * Ends every session of a user but `keep` (a password reset: none kept), with every CLI login of
   * theirs but the one `keep` belongs to and every MCP client's refresh token not issued through
   * `keep`, including logins whose access session has already expired and tokens whose consenting
   * session has (an idle CLI keeps only its refresh token): "sign out the others" leaves nothing else
   * of the account working.
   */
  async revokeAllOf(userId: string, keep: string | null = null): Promise<string[]> {
    const now = this.clock.now();
    const ended = await this.db.transaction(async (tx) => {
      // kept: the CLI login `keep` itself belongs to; a login `keep` approved is another session, and ends
      const keptFamilies = keep ? tx.select({ familyId: refreshTokens.familyId }).from(refreshTokens).where(eq(refreshTokens.sessionId, keep)) : null;
      const families = await tx
        .update(refreshTokens)
        .set({ revokedAt: now })
        .where(and(eq(refreshTokens.userId, userId), isNull(refreshTokens.revokedAt), keptFamilies ? notInArray(refreshTokens.familyId, keptFamilies) : undefined))
        .returning({ sessionId: refreshTokens.sessionId });
      await tx
        .update(oauthRefreshToken)
        .set({ revoked: now })
        .where(and(eq(oauthRefreshToken.userId, userId), isNull(oauthRefreshToken.revoked), keep ? or(isNull(oauthRefreshToken.sessionId), ne(oauthRefreshToken.sessionId, keep)) : undefined));
      const sessions = await tx
        .select({ id: session.id })
        .from(session)
        .where(and(eq(session.userId, userId), keep ? ne(session.id, keep) : undefined));
      return endWithWhatTheyMade(tx, [...new Set([...sessions.map((s) => s.id), ...families.map((f) => f.sessionId)])], now);
    });
    this.forgetPrincipals();
    return ended;
  }
}

type Tx = Parameters<Parameters<Db["transaction"]>[0]>[0];

/**
 * The sessions `ids`, the CLI families issued with or approved by them, those families' own
 * sessions and so on until nothing new ends (a CLI session may approve another login), then the
 * OAuth refresh tokens issued through any of them; the sessions are deleted last.
 *
 * The sessions are locked first: a CLI login being issued on the strength of one of them holds it
 * (DeviceFlow.issue), so either that login is committed before the families are read here, and
 * ends with them, or it finds the session gone and is not issued. A family that rotates meanwhile
 * is caught by the loop, which reads the families again with every round.
 */
async function endWithWhatTheyMade(tx: Tx, ids: string[], now: Date): Promise<string[]> {
  await tx.select({ id: session.id }).from(session).where(inArray(session.id, ids)).orderBy(session.id).for("update");
  const ended = new Set(ids);
  let frontier = [...ended];
  while (frontier.length > 0) {
    const families = tx
      .select({ familyId: refreshTokens.familyId })
      .from(refreshTokens)
      .where(or(inArray(refreshTokens.sessionId, frontier), inArray(refreshTokens.madeBySessionId, frontier)));
    const revoked = await tx
      .update(refreshTokens)
      .set({ revokedAt: now })
      .where(and(inArray(refreshTokens.familyId, families), isNull(refreshTokens.revokedAt)))
      .returning({ sessionId: refreshTokens.sessionId });
    frontier = [...new Set(revoked.map((r) => r.sessionId))].filter((id) => !ended.has(id));
    for (const id of frontier) ended.add(id);
  }
  const all = [...ended];
  await tx
    .update(oauthRefreshToken)
    .set({ revoked: now })
    .where(and(inArray(oauthRefreshToken.sessionId, all), isNull(oauthRefreshToken.revoked)));
  const deleted = await tx.delete(session).where(inArray(session.id, all)).returning({ id: session.id });
  return deleted.map((d) => d.id);
}
