import { activeCredential, type Context, type Outcome } from "../context.js";
import { hasExpired, readCredential, withCredentialLock, writeCredential, type Credential } from "../credentials.js";
import { failures } from "../failures.js";
import { Unreachable } from "../http.js";
import type { TokenAnswer } from "../iam-client.js";

/** A token with less than this left is refreshed first, so the tool that asked can still use it. */
const REFRESH_MARGIN_MS = 60_000;

/**
 * `core token`: prints a valid access token for other tools (`curl -H "authorization: Bearer
 * $(core token)"`). An expired stored token is exchanged with its refresh token first (spec §5.6:
 * the refresh token rotates), and the new pair is stored.
 */
export async function token(ctx: Context): Promise<Outcome> {
  const usable = await usableToken(ctx);
  return { text: usable.token, json: { ...usable } };
}

/** What `core token` prints; `core stacks` sends it to the stack registry. */
export interface UsableToken {
  token: string;
  expiresAt: string | null;
  source: "env" | "file";
  refreshed: boolean;
}

/** `CORE_TOKEN`, else the stored token, refreshed first when it has (nearly) expired. */
export async function usableToken(ctx: Context): Promise<UsableToken> {
  const active = await activeCredential(ctx.settings);
  if (!active) throw failures.notLoggedIn(ctx.settings.credentialsPath);
  if (active.source === "env") return { token: active.token, expiresAt: null, source: "env", refreshed: false };

  let credential = active.stored;
  const refreshed = hasExpired(credential, ctx.now(), REFRESH_MARGIN_MS) && credential.refreshToken !== null;
  if (refreshed) credential = await withCredentialLock(ctx.settings.credentialsPath, () => refreshStored(ctx), ctx.sleep);
  if (hasExpired(credential, ctx.now())) throw failures.storedTokenExpired(credential.email, credential.expiresAt, false);
  return { token: credential.token, expiresAt: credential.expiresAt, source: "file", refreshed };
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
