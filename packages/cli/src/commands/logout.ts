import type { Context, Outcome } from "../context.js";
import { deleteCredential, readCredential, type Credential } from "../credentials.js";
import { CliFailure } from "../failures.js";
import { Unreachable } from "../http.js";

/**
 * `core logout`: revokes the login on the server (RFC 7009), then deletes the credential file
 * (spec §4.8) — also when IAM cannot be reached, saying so. A token given to `core login --token`
 * was made elsewhere and may serve other jobs, so it is forgotten but not revoked.
 */
export async function logout(ctx: Context): Promise<Outcome> {
  const path = ctx.settings.credentialsPath;
  let credential: Credential | null = null;
  let unreadable = false;
  try {
    credential = await readCredential(path);
  } catch (err) {
    if (!(err instanceof CliFailure)) throw err;
    unreadable = true;
  }
  if (ctx.settings.envToken) ctx.warn("Note: CORE_TOKEN is still set in this environment; unset it to stop using that token.");

  if (!credential && !unreadable) {
    return { text: `Not logged in: there is no ${path}.`, json: { loggedOut: true, deleted: false, revoked: false, credentialsPath: path } };
  }

  let revoked = false;
  let notRevokedBecause: string | null = null;
  if (credential?.refreshToken) {
    notRevokedBecause = await revokeLogin(ctx, credential);
    revoked = notRevokedBecause === null;
    if (!revoked) {
      ctx.warn(`Could not revoke the session at ${credential.iamUrl} (${notRevokedBecause}); it stays valid until ${credential.expiresAt}.`);
    }
  }
  await deleteCredential(path);

  const lines = [revoked ? `Logged out: revoked the session at ${credential!.iamUrl} and deleted ${path}.` : `Logged out: deleted ${path}.`];
  if (credential && !credential.refreshToken) lines.push("The token given to core login --token was not revoked; revoke it where it was issued.");
  return {
    text: lines.join("\n"),
    json: { loggedOut: true, deleted: true, revoked, ...(notRevokedBecause ? { revocationError: notRevokedBecause } : {}), credentialsPath: path },
  };
}

/** Null when IAM revoked both tokens, else why not. The refresh token goes first, so no new session can follow. */
async function revokeLogin(ctx: Context, credential: Credential): Promise<string | null> {
  const iam = ctx.iam(credential.iamUrl);
  try {
    for (const [token, hint] of [
      [credential.refreshToken!, "refresh_token"],
      [credential.token, "access_token"],
    ] as const) {
      const status = await iam.revoke(token, hint);
      if (status !== 200) return `HTTP ${status}`;
    }
    return null;
  } catch (err) {
    if (err instanceof Unreachable) return err.reason;
    throw err;
  }
}
