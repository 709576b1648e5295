import { and, eq, gt, inArray, isNull, lt, sql } from "drizzle-orm";
import { createHash, randomBytes, randomInt } from "node:crypto";
import { newId, type Clock } from "@core/kit";
import { isUniqueViolation, type Db } from "@core/storage";
import { deviceCodes, member, refreshTokens, session, user } from "./db/schema.js";
import { authStyleId } from "./organizations.js";
import type { SessionRevocation } from "./session-revocation.js";
import { deviceSignInMethod } from "./two-factor.js";

/** The only client of the device flow (spec §4.3, §5.6). */
export const CLI_CLIENT_ID = "core-cli";
export const DEVICE_CODE_GRANT = "urn:ietf:params:oauth:grant-type:device_code";

/** RFC 8628 §6.1: 20 consonants, no vowels (no words), no look-alikes. */
const USER_CODE_ALPHABET = "BCDFGHJKLMNPQRSTVWXZ";
/** RFC 8628 §3.5: each slow_down adds 5 seconds to the interval. */
const SLOW_DOWN_SECONDS = 5;
/** arrival jitter forgiven before a poll counts as too fast */
const POLL_TOLERANCE_MS = 250;

export interface DeviceFlowTimes {
  deviceCodeSeconds: number;
  deviceIntervalSeconds: number;
  accessTokenSeconds: number;
  refreshTokenSeconds: number;
}

/** An RFC 6749 §5.2 / RFC 8628 §3.5 error answer. */
export class OAuthError extends Error {
  constructor(
    readonly error:
      | "invalid_request"
      | "invalid_client"
      | "invalid_grant"
      | "unsupported_grant_type"
      | "authorization_pending"
      | "slow_down"
      | "access_denied"
      | "expired_token",
    readonly description: string,
  ) {
    super(description);
  }
}

const digest = (secret: string) => createHash("sha256").update(secret).digest("hex");

export function newUserCode(): string {
  let code = "";
  for (let i = 0; i < 8; i++) code += USER_CODE_ALPHABET[randomInt(USER_CODE_ALPHABET.length)];
  return code;
}

/** `bcdf-ghjk`, `BCDFGHJK`, ` bcdf ghjk ` → `BCDFGHJK`; anything else → null (DESIGN §5). */
export function normalizeUserCode(input: string): string | null {
  const code = input.toUpperCase().replace(/[\s-]/g, "");
  if (code.length !== 8) return null;
  for (const ch of code) if (!USER_CODE_ALPHABET.includes(ch)) return null;
  return code;
}

export const displayUserCode = (code: string) => `${code.slice(0, 4)}-${code.slice(4)}`;

export interface TokenAnswer {
  access_token: string;
  token_type: "bearer";
  expires_in: number;
  refresh_token: string;
}

export type DeviceRequest = typeof deviceCodes.$inferSelect;

type Tx = Parameters<Parameters<Db["transaction"]>[0]>[0];

/** A refresh token that was no longer there to spend when its successor was to be issued. */
class NotSpent extends Error {}

/** What a CLI login carries from the session that approved it, to every session of its family. */
interface LoginStrength {
  madeBySessionId: string | null;
  signInMethod: string | null;
  ssoProviderId: string | null;
}

/**
 * The device authorization grant (RFC 8628) and refresh token rotation (RFC 6749 §6, RFC 9700
 * §4.14) for the `core` CLI. Access tokens are IAM sessions, so every service accepts them.
 */
export class DeviceFlow {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly times: DeviceFlowTimes,
    private readonly revocation: SessionRevocation,
  ) {}

  /** RFC 8628 §3.1-3.2: a new device code and user code. */
  async start(requester: { ip: string | null; userAgent: string | null }) {
    const now = this.clock.now();
    const deviceCode = randomBytes(32).toString("base64url");
    await this.db.delete(deviceCodes).where(lt(deviceCodes.expiresAt, new Date(now.getTime() - 86_400_000)));
    for (let attempt = 0; ; attempt++) {
      const userCode = newUserCode();
      const id = newId("dvc");
      try {
        await this.db.insert(deviceCodes).values({
          id,
          deviceCodeHash: digest(deviceCode),
          userCode,
          clientId: CLI_CLIENT_ID,
          status: "pending",
          intervalSeconds: this.times.deviceIntervalSeconds,
          requesterIp: requester.ip,
          requesterAgent: requester.userAgent?.slice(0, 256) ?? null,
          expiresAt: new Date(now.getTime() + this.times.deviceCodeSeconds * 1000),
          createdAt: now,
        });
        return { id, deviceCode, userCode, expiresIn: this.times.deviceCodeSeconds, interval: this.times.deviceIntervalSeconds };
      } catch (err) {
        // another pending request holds this user code (1 in 25.6 billion): draw again
        if (attempt < 5 && isUniqueViolation(err, "device_codes_pending_user_code")) continue;
        throw err;
      }
    }
  }

  /** The pending, unexpired request behind a user code, for the activation page. */
  async pending(userCodeInput: string): Promise<DeviceRequest | null> {
    const userCode = normalizeUserCode(userCodeInput);
    if (!userCode) return null;
    const [row] = await this.db
      .select()
      .from(deviceCodes)
      .where(and(eq(deviceCodes.userCode, userCode), eq(deviceCodes.status, "pending")));
    if (!row || row.expiresAt <= this.clock.now()) return null;
    return row;
  }

  /**
   * The user approves (or denies) the request with one of their sessions; null when the code is
   * unknown, used or expired. The login is made with the approving session's strength, read from
   * that session in the same statement, and never gains more (docs/vault/cross-cutting/security.md).
   */
  async decide(userCodeInput: string, approver: { userId: string; sessionId: string }, approve: boolean): Promise<DeviceRequest | null> {
    const userCode = normalizeUserCode(userCodeInput);
    if (!userCode) return null;
    const now = this.clock.now();
    const approving = and(eq(session.id, approver.sessionId), eq(session.userId, approver.userId));
    const [row] = await this.db
      .update(deviceCodes)
      .set({
        status: approve ? "approved" : "denied",
        userId: approver.userId,
        decidedAt: now,
        approvedBySessionId: approver.sessionId,
        approvedSignInMethod: sql`(select ${session.signInMethod} from ${session} where ${approving})`,
        approvedSsoProviderId: sql`(select ${session.ssoProviderId} from ${session} where ${approving})`,
      })
      .where(and(eq(deviceCodes.userCode, userCode), eq(deviceCodes.status, "pending"), sql`${deviceCodes.expiresAt} > ${now.toISOString()}`))
      .returning();
    return row ?? null;
  }

  /** A request this user decided (approved, since used, or denied): what the page after the decision shows. */
  async decidedBy(id: string, userId: string): Promise<DeviceRequest | null> {
    const [row] = await this.db
      .select()
      .from(deviceCodes)
      .where(and(eq(deviceCodes.id, id), eq(deviceCodes.userId, userId), inArray(deviceCodes.status, ["approved", "consumed", "denied"])));
    return row ?? null;
  }

  /** RFC 8628 §3.4-3.5: one poll of the token endpoint. */
  async poll(deviceCode: string, clientId: string, requester: { ip: string | null; userAgent: string | null }): Promise<{ tokens: TokenAnswer; userId: string }> {
    const [row] = await this.db.select().from(deviceCodes).where(eq(deviceCodes.deviceCodeHash, digest(deviceCode)));
    if (!row || row.status === "consumed") throw new OAuthError("invalid_grant", "Unknown or already used device code");
    if (row.clientId !== clientId) throw new OAuthError("invalid_grant", "The device code was issued to another client");
    const now = this.clock.now();
    if (row.status === "denied") throw new OAuthError("access_denied", "The user denied the request");
    if (row.expiresAt <= now) throw new OAuthError("expired_token", "The device code has expired; start again");
    if (row.status === "pending") {
      const tooFast = row.lastPolledAt !== null && now.getTime() - row.lastPolledAt < row.intervalSeconds * 1000 - POLL_TOLERANCE_MS;
      await this.db
        .update(deviceCodes)
        .set({ lastPolledAt: now.getTime(), intervalSeconds: tooFast ? row.intervalSeconds + SLOW_DOWN_SECONDS : row.intervalSeconds })
        .where(eq(deviceCodes.id, row.id));
      if (tooFast) throw new OAuthError("slow_down", `Poll at most every ${row.intervalSeconds + SLOW_DOWN_SECONDS} seconds`);
      throw new OAuthError("authorization_pending", "The user has not answered yet");
    }
    // approved: the code yields tokens exactly once, whoever polls first
    const [consumed] = await this.db
      .update(deviceCodes)
      .set({ status: "consumed" })
      .where(and(eq(deviceCodes.id, row.id), eq(deviceCodes.status, "approved")))
      .returning();
    if (!consumed?.userId) throw new OAuthError("invalid_grant", "Unknown or already used device code");
    const userId = consumed.userId;
    const strength = { madeBySessionId: consumed.approvedBySessionId, signInMethod: consumed.approvedSignInMethod, ssoProviderId: consumed.approvedSsoProviderId };
    // the approval stands only while the session that gave it does: one signed out, revoked or
    // signed out by a password change since then approves nothing (session-revocation.ts)
    const approverLives = async (tx: Tx) => {
      const approver = strength.madeBySessionId;
      const [live] = approver
        ? await tx
            .select({ id: session.id })
            .from(session)
            .where(and(eq(session.id, approver), eq(session.userId, userId), gt(session.expiresAt, now)))
            .for("share")
        : [];
      if (!live) throw new OAuthError("invalid_grant", "The session that approved this login has ended since: start the login again");
    };
    return { tokens: await this.issue(userId, newId("fam"), strength, requester, null, approverLives), userId };
  }

  /**
   * RFC 6749 §6 with rotation: a refresh token is spent by its first use. Presenting a spent one
   * means it was copied: the whole family and its sessions are revoked (RFC 9700 §4.14).
   */
  async refresh(refreshToken: string, clientId: string, requester: { ip: string | null; userAgent: string | null }) {
    const [row] = await this.db.select().from(refreshTokens).where(eq(refreshTokens.tokenHash, digest(refreshToken)));
    if (!row || row.clientId !== clientId) return { outcome: "invalid" as const };
    const now = this.clock.now();
    if (row.usedAt || row.revokedAt) {
      const reused = row.usedAt !== null && row.revokedAt === null;
      if (reused) await this.revokeFamily(row.familyId);
      return { outcome: reused ? ("reused" as const) : ("invalid" as const), userId: row.userId, familyId: row.familyId };
    }
    if (row.expiresAt <= now) return { outcome: "invalid" as const };
    const organizationId = await this.chosenOrganization(row.sessionId, row.userId);
    // the family keeps the strength it was approved with, however often it is refreshed
    const strength = { madeBySessionId: row.madeBySessionId, signInMethod: row.signInMethod, ssoProviderId: row.ssoProviderId };
    // spent in the transaction that issues its successor: a revocation of the family that runs
    // meanwhile either waits for both (and ends the successor too) or leaves nothing to spend
    const spend = async (tx: Tx) => {
      const [spent] = await tx
        .update(refreshTokens)
        .set({ usedAt: now })
        .where(and(eq(refreshTokens.id, row.id), isNull(refreshTokens.usedAt), isNull(refreshTokens.revokedAt)))
        .returning({ id: refreshTokens.id });
      if (!spent) throw new NotSpent();
    };
    try {
      return { outcome: "ok" as const, userId: row.userId, familyId: row.familyId, tokens: await this.issue(row.userId, row.familyId, strength, requester, organizationId, spend) };
    } catch (err) {
      if (!(err instanceof NotSpent)) throw err;
    }
    // not spendable any more: its login ended meanwhile, or a concurrent use of the same token won the race and this one is the reuse
    const [after] = await this.db.select({ revokedAt: refreshTokens.revokedAt }).from(refreshTokens).where(eq(refreshTokens.id, row.id));
    if (!after || after.revokedAt) return { outcome: "invalid" as const };
    await this.revokeFamily(row.familyId);
    return { outcome: "reused" as const, userId: row.userId, familyId: row.familyId };
  }

  /**
   * RFC 7009: a refresh token revokes its family and the sessions issued with it; an access token
   * ends its session (and so its family). Unknown tokens are not an error.
   */
  async revoke(token: string): Promise<{ kind: "refresh" | "access"; userId: string } | null> {
    const [row] = await this.db.select().from(refreshTokens).where(eq(refreshTokens.tokenHash, digest(token)));
    if (row) {
      await this.revokeFamily(row.familyId);
      return { kind: "refresh", userId: row.userId };
    }
    const [access] = await this.db.select({ id: session.id, userId: session.userId }).from(session).where(eq(session.token, token));
    if (!access) return null;
    await this.revocation.revoke([access.id]);
    return { kind: "access", userId: access.userId };
  }

  /** A family whose spent token came back (or that RFC 7009 revokes): its sessions end, with what they made. */
  private async revokeFamily(familyId: string) {
    const family = await this.db.select({ sessionId: refreshTokens.sessionId }).from(refreshTokens).where(eq(refreshTokens.familyId, familyId));
    await this.revocation.revoke(family.map((f) => f.sessionId));
  }

  /**
   * The organization the login chose (`core org switch`, set-active) on the session a refresh token
   * was issued with: the refreshed session keeps it while the user is still a member there.
   */
  private async chosenOrganization(sessionId: string, userId: string): Promise<string | null> {
    const [row] = await this.db
      .select({ organizationId: member.organizationId })
      .from(session)
      .innerJoin(member, and(eq(member.organizationId, session.activeOrganizationId), eq(member.userId, userId)))
      .where(eq(session.id, sessionId));
    return row?.organizationId ?? null;
  }

  /**
   * A new access session and refresh token of the family, in one transaction with `first`: what
   * the login must still be for them to be issued (its approver alive, its last token unspent).
   */
  private async issue(
    userId: string,
    familyId: string,
    strength: LoginStrength,
    requester: { ip: string | null; userAgent: string | null },
    activeOrganizationId: string | null,
    first: (tx: Tx) => Promise<void>,
  ): Promise<TokenAnswer> {
    const now = this.clock.now();
    const accessToken = authStyleId();
    const refreshToken = randomBytes(32).toString("base64url");
    const sessionId = authStyleId();
    await this.db.transaction(async (tx) => {
      await first(tx);
      const [exists] = await tx.select({ id: user.id }).from(user).where(eq(user.id, userId));
      if (!exists) throw new OAuthError("invalid_grant", "The user no longer exists");
      await tx.insert(session).values({
        id: sessionId,
        token: accessToken,
        userId,
        expiresAt: new Date(now.getTime() + this.times.accessTokenSeconds * 1000),
        createdAt: now,
        updatedAt: now,
        ipAddress: requester.ip,
        userAgent: requester.userAgent?.slice(0, 256) ?? CLI_CLIENT_ID,
        activeOrganizationId,
        // as strong as the session that approved the login, never more (two-factor.ts meetsTwoFactor)
        signInMethod: deviceSignInMethod(strength.signInMethod),
        ssoProviderId: strength.ssoProviderId,
      });
      await tx.insert(refreshTokens).values({
        id: newId("rft"),
        tokenHash: digest(refreshToken),
        familyId,
        userId,
        clientId: CLI_CLIENT_ID,
        sessionId,
        expiresAt: new Date(now.getTime() + this.times.refreshTokenSeconds * 1000),
        createdAt: now,
        ...strength,
      });
    });
    return { access_token: accessToken, token_type: "bearer", expires_in: this.times.accessTokenSeconds, refresh_token: refreshToken };
  }
}

