import { activeCredential, type Context, type Outcome } from "../context.js";
import { hasExpired, readCredential, withCredentialLock, writeCredential, type Credential } from "../credentials.js";
import { failures } from "../failures.js";
import { Unreachable } from "../http.js";
import type { TokenAnswer } from "../iam-client.js";
import { resolveIamUrl } from "../settings.js";

/** A token with less than this left is refreshed first, so the tool that asked can still use it. */
const REFRESH_MARGIN_MS = 60_000;

/**
 * `core token`: prints a valid access token for other tools (`curl -H "authorization: Bearer
 * $(core token)"`). An expired stored token is exchanged with its refresh token first (spec §5.6:
 * the refresh token rotates), and the new pair is stored.
 */
export async function token(ctx: Context): Promise<Outcome> {
  const { token, expiresAt, source, refreshed } = await usableToken(ctx);
  return { text: token, json: { token, expiresAt, source, refreshed } };
}

/** What `core token` prints; `core stacks` and `core billing` send it to their service. */
export interface UsableToken {
  token: string;
  expiresAt: string | null;
  source: "env" | "file";
  refreshed: boolean;
  /** the IAM the token belongs to: the stored login's, or `CORE_IAM_URL` (else the default) for CORE_TOKEN */
  iamUrl: string;
}

/** `CORE_TOKEN`, else the stored token, refreshed first when it has (nearly) expired. */
export async function usableToken(ctx: Context): Promise<UsableToken> {
  const active = await activeCredential(ctx.settings);
  if (!active) throw failures.notLoggedIn(ctx.settings.credentialsPath);
  if (active.source === "env") return { token: active.token, expiresAt: null, source: "env", refreshed: false, iamUrl: active.iamUrl };

  let credential = active.stored;
  const refreshed = hasExpired(credential, ctx.now(), REFRESH_MARGIN_MS) && credential.refreshToken !== null;
  if (refreshed) credential = await withCredentialLock(ctx.settings.credentialsPath, () => refreshStored(ctx), ctx.sleep);
  if (hasExpired(credential, ctx.now())) throw failures.storedTokenExpired(credential.email, credential.expiresAt, false);
  return { token: credential.token, expiresAt: credential.expiresAt, source: "file", refreshed, iamUrl: credential.iamUrl };
}

/** The credential a command sends to a service, with how a message names it and the IAM it belongs to. */
export interface TokenToSend {
  token: string;
  /** "the token given to --token", "the token in CORE_TOKEN", "the stored token" */
  source: string;
  iamUrl: string;
}

/** `--token` (`-` reads it from standard input), else CORE_TOKEN, else the stored login (refreshed). */
export async function tokenToSend(ctx: Context, flag: string | undefined): Promise<TokenToSend> {
  if (flag !== undefined) {
    const token = (flag === "-" ? await ctx.readStdinLine("Paste the token and press Enter:") : flag).trim();
    if (!token) throw failures.noToken();
    return { token, source: "the token given to --token", iamUrl: resolveIamUrl(undefined, ctx.settings) };
  }
  const usable = await usableToken(ctx);
  return { token: usable.token, source: usable.source === "env" ? "the token in CORE_TOKEN" : "the stored token", iamUrl: usable.iamUrl };
}

/** Under the lock: another `core token` may have refreshed meanwhile, so the file is read again. */
async function refreshStored(ctx: Context): Promise<Credential> {
  const path = ctx.settings.credentialsPath;
  const current = await readCredential(path);
  if (!current) throw failures.notLoggedIn(path);
  if (!hasExpired(current, ctx.now(), REFRESH_MARGIN_MS) || current.refreshToken === null) return current;

  const iam = ctx.iam(current.iamUrl);
  let answer: TokenAnswer;
  try {
    answer = await iam.refresh(current.refreshToken);
  } catch (err) {
    if (!(err instanceof Unreachable)) throw err;
    // the old token still has a little time left: better than nothing
    if (!hasExpired(current, ctx.now())) return current;
    throw failures.iamUnreachable(current.iamUrl, err.reason);
  }
  if (!("tokens" in answer)) {
    if (answer.error === "invalid_grant") throw failures.refreshRefused(current.iamUrl, answer.error);
    throw failures.unexpectedAnswer(current.iamUrl, "the refresh", answer.status, answer.error);
  }
  const next: Credential = {
    ...current,
    token: answer.tokens.access_token,
    refreshToken: answer.tokens.refresh_token,
    expiresAt: new Date(ctx.now() + answer.tokens.expires_in * 1000).toISOString(),
  };
  await writeCredential(path, next);
  return next;
}
