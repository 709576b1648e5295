import { activeCredential, describeSource, type Context, type Outcome } from "../context.js";
import { hasExpired } from "../credentials.js";
import { failures, type PolicyHold } from "../failures.js";
import { isApiKey, Unreachable } from "../http.js";
import type { Identity, WhoamiAnswer } from "../iam-client.js";

/**
 * `core whoami`: asks IAM who the credential in use stands for (`POST /api/v1/cli/whoami`, spec
 * §4.3). It reads the credential file without changing it (spec §4.8), so an expired stored token
 * is reported, not refreshed.
 */
export async function whoami(ctx: Context, options: { iamUrl?: string }): Promise<Outcome> {
  const active = await activeCredential(ctx.settings, options.iamUrl);
  if (!active) throw failures.notLoggedIn(ctx.settings.credentialsPath);
  if (active.source === "file" && options.iamUrl !== undefined) ctx.warn(`Note: --iam-url is for CORE_TOKEN; the stored login asks ${active.iamUrl}, where it was made.`);
  if (active.source === "file" && hasExpired(active.stored, ctx.now())) {
    throw failures.storedTokenExpired(active.stored.email, active.stored.expiresAt, active.stored.refreshToken !== null);
  }

  const identity = await identityOf(ctx, active.iamUrl, active.token, describeSource(active));
  const { email, platformId, role } = identity;
  const credential = active.source === "env" ? "CORE_TOKEN" : ctx.settings.credentialsPath;
  // an API key without expiry stored by core login --token is kept for 30 days (spec §4.8): that is
  // when this login ends, as core status says too; the key itself lives on
  const keptUntil = active.source === "file" && isApiKey(active.token) && !identity.expiresAt ? active.stored.expiresAt : null;
  const expiresAt = keptUntil ?? identity.expiresAt;
  return {
    text: [
      `Logged in to ${active.iamUrl} as ${email}`,
      platformId
        ? `Platform: ${platformId} (role: ${role || "none"})`
        : role
          ? `Platform: none (role: ${role}, in an organization without a platform; core org list shows your others)`
          : `Platform: none (no organization yet: set one up at ${active.iamUrl}/onboarding, or accept an invitation)`,
      // IAM states no expiry for an API key made without one
      `Token expires: ${keptUntil ? `${keptUntil} (this login; the API key itself never expires)` : expiresAt || (isApiKey(active.token) ? "never (an API key without expiry)" : "not stated")}`,
      `Credential: ${credential}`,
    ].join("\n"),
    // what IAM leaves empty is null for scripts, never ""
    json: { email, platformId: platformId || null, role: role || null, expiresAt: expiresAt || null, iamUrl: active.iamUrl, source: active.source, credential },
  };
}

/** A session token (32 letters and digits) or an API key (`core_` and 64 letters): what IAM issues. */
const TOKEN_SHAPE = /^(?:[A-Za-z0-9]{32}|core_[A-Za-z]{64})$/;

/** Who IAM says `token` stands for; `source` names the token in the failure when IAM refuses it. */
export async function identityOf(ctx: Context, iamUrl: string, token: string, source: string): Promise<Identity> {
  let answer: WhoamiAnswer;
  try {
    answer = await ctx.iam(iamUrl).whoami(token);
  } catch (err) {
    if (err instanceof Unreachable) throw failures.iamUnreachable(iamUrl, err.reason);
    throw err;
  }
  if ("identity" in answer) return answer.identity;
  const hold = await heldBack(ctx, iamUrl, token, answer);
  if (hold) throw failures.heldBack(iamUrl, source, answer.message, hold);
  const detail = [answer.code, answer.message].filter(Boolean).join(": ");
  if (answer.status === 401) {
    if (!TOKEN_SHAPE.test(token)) throw failures.tokenMalformed(source);
    throw source === "the stored token" ? failures.tokenNotAccepted(source, iamUrl, detail) : failures.tokenNotValid(source, iamUrl, detail);
  }
  throw failures.unexpectedAnswer(iamUrl, "whoami", answer.status, detail);
}

/**
 * What holds `token` back when IAM refused its whoami with 403: its organization's policy (the
 * CLI's routes carry no details, so IAM's session route is asked what the policy is and where to
 * comply). Null for any other refusal, or when IAM cannot be asked.
 */
export async function heldBack(ctx: Context, iamUrl: string, token: string, answer: { status: number }): Promise<PolicyHold | null> {
  if (answer.status !== 403 || isApiKey(token)) return null;
  try {
    return await ctx.iam(iamUrl).policyHoldOf(token);
  } catch (err) {
    if (err instanceof Unreachable) return null;
    throw err;
  }
}
