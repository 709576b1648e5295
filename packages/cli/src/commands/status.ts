import { activeCredential, type Context, type Outcome } from "../context.js";
import { hasExpired, type Credential } from "../credentials.js";
import { failures } from "../failures.js";
import { isApiKey } from "../http.js";

/** `core status`: which credential commands use and where it is kept. Reads only; asks no server. */
export async function status(ctx: Context): Promise<Outcome> {
  const path = ctx.settings.credentialsPath;
  const active = await activeCredential(ctx.settings);
  if (!active) throw failures.notLoggedIn(path);

  if (active.source === "env") {
    const lines = [`Using the token in CORE_TOKEN, for IAM at ${active.iamUrl}.`];
    if (active.stored) lines.push(`The stored login in ${path} (${active.stored.email}) is ignored while CORE_TOKEN is set.`);
    return { text: lines.join("\n"), json: { source: "env", iamUrl: active.iamUrl, credentialsPath: path, storedLoginIgnored: active.stored !== null } };
  }

  const stored = active.stored;
  const expired = hasExpired(stored, ctx.now());
  const refreshable = stored.refreshToken !== null;
  return {
    text: [
      `Using the stored login in ${path}`,
      `  account:  ${stored.email}`,
      `  platform: ${stored.platformId ? `${stored.platformId} (role: ${stored.role || "none"})` : "none"}`,
      `  IAM:      ${stored.iamUrl}`,
      `  expires:  ${stored.expiresAt} (${expiryNote(expired, refreshable)}${isApiKey(stored.token) ? "; an API key's own expiry: core whoami" : ""})`,
      `  obtained: ${refreshable ? "device login (refreshable)" : "core login --token"}`,
    ].join("\n"),
    json: { source: "file", credentialsPath: path, ...publicFields(stored), expired, refreshable },
  };
}

function expiryNote(expired: boolean, refreshable: boolean) {
  if (!expired) return "valid";
  return refreshable ? "expired; core token refreshes it" : "expired; run core login";
}

const publicFields = ({ email, platformId, role, expiresAt, iamUrl, audience }: Credential) => ({ email, platformId, role, expiresAt, iamUrl, audience });
