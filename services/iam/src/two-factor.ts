import { sql } from "drizzle-orm";
import { APIError, createAuthMiddleware, getSessionFromCtx, isAPIError } from "better-auth/api";
import { deleteSessionCookie } from "better-auth/cookies";
import { generateRandomString, symmetricDecrypt, symmetricEncrypt } from "better-auth/crypto";
import { twoFactor } from "better-auth/plugins";
import { createOTP } from "@better-auth/utils/otp";
import type { Db } from "@core/storage";
import { rowsOf } from "@core/storage";
import type { AuditInput, AuditLog } from "./audit.js";

/**
 * Two-factor sign-in (issue 28) with better-auth's `twoFactor` plugin: TOTP (RFC 6238, 6 digits,
 * 30-second steps, the plugin accepts the step before and after) and ten one-time backup codes,
 * both stored encrypted with the auth secret (the plugin's default). What the plugin does not do
 * is wrapped here, each with its reason:
 * - it accepts one TOTP code again and again for its whole window (about 90 s): we remember the last
 *   accepted step per user (`iam.totp_steps`) and refuse that step and older ones;
 * - its second step covers `/sign-in/email` only: a magic link of an enrolled user gives no session
 *   either, but the same two-factor cookie the password sign-in gives;
 * - its disable route asks for the password only: ours also needs a code (TOTP or a backup code).
 */

export const TOTP_PERIOD_SECONDS = 30;
/** steps either side of now that the plugin accepts (its `verify` default) */
const TOTP_WINDOW = 1;
/** the plugin's two-factor cookie (constant.mjs), and the prefix of the challenges a magic link starts */
export const TWO_FACTOR_COOKIE = "two_factor";
const MAGIC_LINK_CHALLENGE = "2fa-ml-";
/** the plugin's own challenge lifetime (twoFactorCookieMaxAge default) */
const CHALLENGE_SECONDS = 600;

/** The page that asks for the second factor. */
export const TWO_FACTOR_PAGE = "/sign-in/two-factor";

/** The plugin, as IAM configures it. */
export const twoFactorPlugin = () =>
  twoFactor({
    issuer: "Core",
    // backup codes are encrypted with the auth secret (the plugin's default, said here on purpose)
    backupCodeOptions: { storeBackupCodes: "encrypted", amount: 10, length: 10 },
    // 10 wrong codes in a row lock the second step of sign-in for 15 minutes (NIST SP 800-63B §5.2.2)
    accountLockout: { enabled: true, maxFailedAttempts: 10, durationSeconds: 900 },
  });

/** The step (counter) a code belongs to, among those the plugin accepts now; null when none. */
export async function matchingStep(secret: string, code: string, nowMs: number): Promise<number | null> {
  if (!/^\d{6}$/.test(code)) return null;
  const otp = createOTP(secret, { digits: 6, period: TOTP_PERIOD_SECONDS });
  const current = Math.floor(nowMs / 1000 / TOTP_PERIOD_SECONDS);
  let found: number | null = null;
  for (let step = current - TOTP_WINDOW; step <= current + TOTP_WINDOW; step++) {
    if ((await otp.hotp(step)) === code) found = step;
  }
  return found;
}

/** Takes `step` as the user's last accepted TOTP step; false when it, or a later one, was taken already. */
export async function claimStep(db: Db, userId: string, step: number): Promise<boolean> {
  const result = await db.execute(sql`
    insert into iam.totp_steps (user_id, last_step) values (${userId}, ${step})
    on conflict (user_id) do update set last_step = excluded.last_step where iam.totp_steps.last_step < excluded.last_step
    returning user_id`);
  return rowsOf(result).length === 1;
}

type HookContext = Parameters<Parameters<typeof createAuthMiddleware>[0]>[0];

interface TwoFactorRow {
  id: string;
  secret: string;
  backupCodes: string;
  verified: boolean | null;
}

const findRow = (ctx: HookContext, userId: string) =>
  ctx.context.adapter.findOne<TwoFactorRow>({ model: "twoFactor", where: [{ field: "userId", value: userId }] });

/**
 * The session of a request, by cookie or bearer token: our hooks run before the bearer plugin's,
 * which turns the token into a cookie, so a token is looked up here (the library signs it when it
 * is sent without its signature, and the part before the dot is the token either way).
 */
async function sessionOf(ctx: HookContext): Promise<{ userId: string; twoFactorEnabled: boolean } | null> {
  const session = await getSessionFromCtx(ctx).catch(() => null);
  if (session) return { userId: session.user.id, twoFactorEnabled: Boolean((session.user as { twoFactorEnabled?: boolean }).twoFactorEnabled) };
  const authorization = (ctx.request?.headers ?? ctx.headers)?.get("authorization") ?? "";
  if (!/^bearer\s/i.test(authorization)) return null;
  const token = decodeURIComponent(authorization.slice(7).trim()).split(".")[0]!;
  if (!token) return null;
  const found = await ctx.context.internalAdapter.findSession(token);
  if (!found || new Date(found.session.expiresAt).getTime() <= Date.now()) return null;
  return { userId: found.user.id, twoFactorEnabled: Boolean((found.user as { twoFactorEnabled?: boolean }).twoFactorEnabled) };
}

/** The user a two-factor request is for: the session's, else the pending challenge's (the plugin's cookie). */
async function userOfRequest(ctx: HookContext): Promise<{ userId: string; challenge: string | null; twoFactorEnabled: boolean } | null> {
  const session = await sessionOf(ctx);
  if (session) return { ...session, challenge: null };
  const challenge = await ctx.getSignedCookie(ctx.context.createAuthCookie(TWO_FACTOR_COOKIE).name, ctx.context.secret);
  if (!challenge) return null;
  const found = await ctx.context.internalAdapter.findVerificationValue(challenge);
  return found ? { userId: found.value, challenge, twoFactorEnabled: true } : null;
}

/**
 * A TOTP code checked against the user's secret and taken: "ok", "replayed" (its step, or a later
 * one, was accepted before), or "wrong". Time is the wall clock, as the plugin's own check reads it:
 * both must agree on the step.
 */
async function takeTotp(ctx: HookContext, db: Db, userId: string, row: TwoFactorRow, code: string): Promise<"ok" | "replayed" | "wrong"> {
  const secret = await symmetricDecrypt({ key: ctx.context.secretConfig, data: row.secret });
  const step = await matchingStep(secret, code, Date.now());
  if (step === null) return "wrong";
  return (await claimStep(db, userId, step)) ? "ok" : "replayed";
}

/** A backup code checked and spent (the stored list loses it only if nobody changed the list meanwhile). */
async function spendBackupCode(ctx: HookContext, row: TwoFactorRow, code: string): Promise<boolean> {
  const codes = JSON.parse(await symmetricDecrypt({ key: ctx.context.secretConfig, data: row.backupCodes })) as string[];
  if (!codes.includes(code)) return false;
  const remaining = await symmetricEncrypt({ key: ctx.context.secretConfig, data: JSON.stringify(codes.filter((c) => c !== code)) });
  const updated = await ctx.context.adapter.incrementOne({
    model: "twoFactor",
    where: [
      { field: "id", value: row.id },
      { field: "backupCodes", value: row.backupCodes },
    ],
    increment: {},
    set: { backupCodes: remaining },
  });
  return Boolean(updated);
}

export interface TwoFactorHookDeps {
  db: Db;
  audit: AuditLog;
  /** names the user of a request whose session the audit hook cannot see (a pending sign-in) */
  noteActor: (request: Request, userId: string) => void;
  headersOf: (ctx: HookContext) => Pick<AuditInput, "ip" | "userAgent" | "requestId">;
}

const refusal = (code: string, message: string) => new APIError("UNAUTHORIZED", { code, message });

/**
 * Hooks around the library's routes. Before: refuses a replayed TOTP code, and a disable without a
 * valid code. After (before the plugins' own after hooks): a magic link of a user with two-factor
 * on gives no session but the plugin's challenge, and the browser goes to the code page; a
 * confirmed enrolment is audited as `auth.two_factor.enable`.
 */
export function twoFactorHooks(
  deps: TwoFactorHookDeps & {
    codePage: (next: string) => string;
    /** ends the user's sessions but `keep`, with what they made (session-revocation.ts) */
    signOutOthers: (ctx: HookContext, userId: string, keep: string | null) => Promise<void>;
  },
) {
  /** requests confirming an enrolment (a session whose user has two-factor off yet), by user */
  const enrolling = new WeakMap<object, string>();
  const before = async (ctx: HookContext): Promise<void> => {
    if (ctx.path !== "/two-factor/verify-totp" && ctx.path !== "/two-factor/verify-backup-code" && ctx.path !== "/two-factor/disable") return;
    // The plugin's "trust this device" would let later password sign-ins skip the code for 30 days,
    // making sessions that look like a password alone: held back by a two-factor policy with no code
    // to give, since the device skips the step. Not offered (nor on the pages), so refused here.
    if (ctx.path !== "/two-factor/disable" && (ctx.body as { trustDevice?: unknown } | undefined)?.trustDevice === true) {
      throw new APIError("BAD_REQUEST", { code: "TRUST_DEVICE_NOT_OFFERED", message: "Trusting a device is not offered: every sign-in asks for a code" });
    }
    const who = await userOfRequest(ctx);
    if (!who) return; // the plugin answers that itself (no session, no challenge)
    if (ctx.request) deps.noteActor(ctx.request, who.userId);
    if (ctx.path === "/two-factor/verify-totp" && who.challenge === null && !who.twoFactorEnabled && ctx.request) enrolling.set(ctx.request, who.userId);
    const body = (ctx.body ?? {}) as { code?: unknown };
    const code = typeof body.code === "string" ? body.code.trim() : "";
    if (ctx.path === "/two-factor/verify-backup-code") return;
    const row = await findRow(ctx, who.userId);
    if (!row) return; // the plugin says TOTP is not enabled
    if (ctx.path === "/two-factor/verify-totp") {
      const taken = await takeTotp(ctx, deps.db, who.userId, row, code);
      // a wrong code goes on to the plugin, which counts it toward the lockout and refuses it
      if (taken === "replayed") {
        await deps.audit.record({ action: "auth.two_factor.verify", outcome: "failure", actorType: "user", actorId: who.userId, ...deps.headersOf(ctx), metadata: { method: "totp", code: "TOTP_CODE_REUSED" } });
        throw refusal("TOTP_CODE_REUSED", "This code was used already. Wait for the next code in your app.");
      }
      return;
    }
    // disable: the plugin checks the password; a code (TOTP or backup) must come with it
    const ok = row.verified !== false && code !== "" && ((await takeTotp(ctx, deps.db, who.userId, row, code)) === "ok" || (await spendBackupCode(ctx, row, code)));
    if (!ok) {
      await deps.audit.record({ action: "auth.two_factor.disable", outcome: "failure", actorType: "user", actorId: who.userId, ...deps.headersOf(ctx), metadata: { path: ctx.path, code: "INVALID_CODE" } });
      throw refusal("INVALID_CODE", code ? "Invalid code" : "Give a code from your authenticator app, or a backup code, to turn two-factor off");
    }
  };
  /** an answer to put in place of the library's, or undefined */
  const after = async (ctx: HookContext): Promise<unknown> => {
    if (ctx.path === "/two-factor/disable") {
      const userId = (ctx.context.session as { user?: { id: string } } | null)?.user?.id;
      if (userId && !isAPIError(ctx.context.returned)) await withoutSecondFactor(deps.db, userId);
      return undefined;
    }
    if (ctx.path === "/two-factor/verify-totp") {
      const userId = ctx.request ? enrolling.get(ctx.request) : undefined;
      const returned = ctx.context.returned;
      // an enrolment's confirmation: the plugin took the code, two-factor is on from now
      if (!userId || isAPIError(returned)) return undefined;
      await deps.audit.record({ action: "auth.two_factor.enable", outcome: "success", actorType: "user", actorId: userId, ...deps.headersOf(ctx), metadata: { method: "totp" } });
      // sessions that gave no code do not become stronger by it: the others are signed out unless
      // the request says `revokeOtherSessions: false` (docs/vault/cross-cutting/security.md)
      if ((ctx.body as { revokeOtherSessions?: unknown } | undefined)?.revokeOtherSessions !== false) {
        await deps.signOutOthers(ctx, userId, ctx.context.newSession?.session.id ?? null);
      }
      // the plugin replaced the session (its cookie carries the new one) but answers the old, deleted
      // token: a bearer client would be signed out by its own enrolment
      const replacement = ctx.context.newSession?.session.token;
      return replacement && returned && typeof returned === "object" ? ctx.json({ ...(returned as object), token: replacement }) : undefined;
    }
    if (ctx.path !== "/magic-link/verify") return undefined;
    const created = ctx.context.newSession;
    if (!created?.user || !(created.user as { twoFactorEnabled?: boolean }).twoFactorEnabled) return undefined;
    const returned = ctx.context.returned;
    const location = isAPIError(returned) ? ((returned as { headers?: Headers }).headers?.get?.("location") ?? null) : null;
    if (ctx.request) deps.noteActor(ctx.request, created.user.id);
    // the link was good: its session is withdrawn until the code is given, as the plugin does for passwords
    deleteSessionCookie(ctx, true);
    await ctx.context.internalAdapter.deleteSession(created.session.token);
    ctx.context.setNewSession(null);
    const identifier = `${MAGIC_LINK_CHALLENGE}${generateRandomString(20)}`;
    const expiresAt = new Date(Date.now() + CHALLENGE_SECONDS * 1000);
    await ctx.context.internalAdapter.createVerificationValue({ value: created.user.id, identifier, expiresAt });
    await ctx.context.internalAdapter.createVerificationValue({ value: "0", identifier: `2fa-attempts-${identifier}`, expiresAt });
    const cookie = ctx.context.createAuthCookie(TWO_FACTOR_COOKIE, { maxAge: CHALLENGE_SECONDS });
    await ctx.setSignedCookie(cookie.name, identifier, ctx.context.secret, cookie.attributes);
    const next = location ? new URL(location, ctx.context.baseURL).pathname + new URL(location, ctx.context.baseURL).search : "/";
    throw ctx.redirect(deps.codePage(next));
  };
  return { before, after };
}

const SECOND_FACTOR = String.raw`\+(totp|backup_code)$`;

/**
 * Two-factor turned off: the codes the person's sessions and CLI logins gave were of an
 * authenticator that no longer counts, so what they recorded loses its second factor. Turning
 * two-factor on again, with a new authenticator, then upgrades none of them (meetsTwoFactor would
 * otherwise read `password+totp` with two-factor on as two factors).
 */
async function withoutSecondFactor(db: Db, userId: string): Promise<void> {
  await db.transaction(async (tx) => {
    await tx.execute(sql`update iam.session set sign_in_method = regexp_replace(sign_in_method, ${SECOND_FACTOR}, '') where user_id = ${userId} and sign_in_method ~ ${SECOND_FACTOR}`);
    await tx.execute(sql`update iam.refresh_tokens set sign_in_method = regexp_replace(sign_in_method, ${SECOND_FACTOR}, '') where user_id = ${userId} and sign_in_method ~ ${SECOND_FACTOR}`);
    await tx.execute(sql`update iam.device_codes set approved_sign_in_method = regexp_replace(approved_sign_in_method, ${SECOND_FACTOR}, '') where user_id = ${userId} and status = 'approved' and approved_sign_in_method ~ ${SECOND_FACTOR}`);
  });
}

/**
 * Kinds of sign-in a session records (`session.sign_in_method`). A CLI login's sessions record the
 * sign-in of the session that approved it, `device:<method>` (device-flow.ts); `device` alone is a
 * login approved before that was recorded, and counts as no second factor.
 */
export type SignInMethod = "password" | "magic_link" | "passkey" | "sso" | `${"password" | "magic_link"}+${"totp" | "backup_code"}`;

const DEVICE_PREFIX = "device:";

/** The sign-in a session stands on: a CLI login's is the approving session's. */
const standingMethod = (method: string | null) => (method?.startsWith(DEVICE_PREFIX) ? method.slice(DEVICE_PREFIX.length) : method);

/** What the sessions of a CLI login record: the approving session's sign-in, never more. */
export const deviceSignInMethod = (approvedWith: string | null) => `${DEVICE_PREFIX}${standingMethod(approvedWith) ?? "unknown"}`;

/**
 * How a session about to be created was made, from the library path that creates it; undefined
 * keeps what the session already says (a session replaced by a password change or by turning
 * two-factor off keeps its method).
 */
export async function signInMethodOf(
  ctx:
    | {
        path?: string;
        params?: Record<string, string | undefined> | undefined;
        getSignedCookie?: (name: string, secret: string) => Promise<string | null | false>;
        context: { secret: string; createAuthCookie: (name: string) => { name: string }; session?: unknown };
      }
    | null
    | undefined,
  existing: string | null | undefined,
): Promise<{ signInMethod: string; ssoProviderId?: string | null } | undefined> {
  const path = ctx?.path;
  if (!path) return undefined;
  switch (path) {
    case "/change-password": {
      // signing the other sessions out replaces this one, without carrying its fields: it keeps how it was made
      const current = (ctx.context.session as { session?: { signInMethod?: string | null; ssoProviderId?: string | null } } | null | undefined)?.session;
      return current?.signInMethod ? { signInMethod: current.signInMethod, ssoProviderId: current.ssoProviderId ?? null } : undefined;
    }
    case "/sign-in/email":
    case "/sign-up/email":
      return { signInMethod: "password" };
    case "/magic-link/verify":
      return { signInMethod: "magic_link" };
    case "/passkey/verify-authentication":
      // a passkey is two factors in one: a device the user holds, unlocked by their biometrics or PIN
      return { signInMethod: "passkey" };
    case "/two-factor/verify-totp":
    case "/two-factor/verify-backup-code": {
      const factor = path.endsWith("totp") ? "totp" : "backup_code";
      if (existing) return { signInMethod: `${existing.split("+")[0]}+${factor}` };
      const challenge = ctx.getSignedCookie ? await ctx.getSignedCookie(ctx.context.createAuthCookie(TWO_FACTOR_COOKIE).name, ctx.context.secret) : null;
      const first = typeof challenge === "string" && challenge.startsWith(MAGIC_LINK_CHALLENGE) ? "magic_link" : "password";
      return { signInMethod: `${first}+${factor}` };
    }
  }
  if (path.startsWith("/sso/callback") || path.startsWith("/sso/saml2/")) {
    // the identity provider owns the second factor of an SSO sign-in
    return { signInMethod: "sso", ssoProviderId: ctx.params?.providerId ?? null };
  }
  return undefined;
}

/**
 * Whether a session's sign-in completed a second factor (with two-factor still on), or was a passkey.
 * Only how the session itself (or the session that approved a CLI login) signed in counts: turning
 * two-factor on later upgrades no session that gave no code (docs/vault/cross-cutting/security.md).
 */
export function meetsTwoFactor(method: string | null, twoFactorEnabled: boolean): boolean {
  const standing = standingMethod(method);
  return standing === "passkey" || (twoFactorEnabled && standing !== null && /\+(totp|backup_code)$/.test(standing));
}
