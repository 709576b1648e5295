import type { Context, Outcome } from "../context.js";
import { AUDIENCE, writeCredential, type Credential } from "../credentials.js";
import { waitForApproval } from "../device-login.js";
import { failures } from "../failures.js";
import { Unreachable } from "../http.js";
import type { DeviceCode, Identity, IamClient } from "../iam-client.js";
import { resolveIamUrl } from "../settings.js";
import { browserToOffer, openAddress, PRESS_ENTER } from "./open-address.js";
import { heldBack } from "./whoami.js";

/** Spec §8: a token given with `--token` is kept for 30 days unless IAM says otherwise. */
const TOKEN_MODE_DAYS = 30;
/** Spec §5 item 11, DESIGN §5: the email stored when IAM cannot look the token up. */
export const CI_USER = "ci-user";

/** `core login [--token <t> | --token -] [--iam-url <url>] [--no-browser]` (spec §4.8, §7.4). */
export async function login(ctx: Context, options: { token?: string; iamUrl?: string; noBrowser?: boolean }): Promise<Outcome> {
  const iamUrl = resolveIamUrl(options.iamUrl, ctx.settings);
  const viaToken = options.token !== undefined;
  const credential = viaToken ? await loginWithToken(ctx, iamUrl, options.token!) : await loginInBrowser(ctx, iamUrl, !options.noBrowser);
  await writeCredential(ctx.settings.credentialsPath, credential);
  if (ctx.settings.envToken) ctx.warn("Note: CORE_TOKEN is set here, and core uses it instead of the stored login.");
  return {
    text: viaToken ? "Authenticated via token" : `Authenticated as ${credential.email}`,
    json: {
      authenticated: true,
      method: viaToken ? "token" : "device",
      email: credential.email,
      platformId: credential.platformId,
      role: credential.role,
      expiresAt: credential.expiresAt,
      iamUrl,
      credentialsPath: ctx.settings.credentialsPath,
    },
  };
}

/** The device flow (RFC 8628; spec §4.8, §7.3, §7.4). */
async function loginInBrowser(ctx: Context, iamUrl: string, mayOfferBrowser: boolean): Promise<Credential> {
  const iam = ctx.iam(iamUrl);
  let started: Awaited<ReturnType<IamClient["requestDeviceCode"]>>;
  try {
    started = await iam.requestDeviceCode();
  } catch (err) {
    if (err instanceof Unreachable) throw failures.interactiveLoginUnavailable(iamUrl, err.reason);
    throw err;
  }
  if (!started.deviceCode) throw failures.deviceEndpointUnavailable(started.status);
  const code = started.deviceCode;
  const opener = browserToOffer(ctx, mayOfferBrowser);
  ctx.say(instructions(code, opener !== null));

  // Enter opens the page while polling goes on; an approval from elsewhere lets the key go
  const enter = opener ? ctx.waitForEnter() : null;
  void enter?.pressed.then(() => openAddress(ctx, opener!, code.verification_uri_complete || code.verification_uri));
  let tokens: Awaited<ReturnType<typeof waitForApproval>>;
  try {
    tokens = await waitForApproval({
      poll: () => iam.pollDeviceToken(code.device_code),
      intervalSeconds: code.interval,
      limitMs: ctx.settings.loginTimeoutMs,
      clock: ctx,
      iamUrl,
      onSlowDown: (seconds) => ctx.debug(`IAM asked to slow down: polling every ${seconds} s`),
    });
  } finally {
    enter?.cancel();
  }

  let identity: Identity;
  try {
    const answer = await iam.whoami(tokens.access_token);
    if (!("identity" in answer)) throw failures.identityUnavailable(iamUrl, `HTTP ${answer.status} ${answer.code}`);
    identity = answer.identity;
  } catch (err) {
    if (err instanceof Unreachable) throw failures.identityUnavailable(iamUrl, err.reason);
    throw err;
  }
  const fallbackExpiry = new Date(ctx.now() + tokens.expires_in * 1000).toISOString();
  return credentialOf(identity, { token: tokens.access_token, refreshToken: tokens.refresh_token, iamUrl, fallbackExpiry });
}

function instructions(code: DeviceCode, offerBrowser: boolean): string {
  const lines = [`Your one-time code: ${code.user_code}`];
  if (code.verification_uri_complete) {
    lines.push("Open this address in a browser and approve the login:", `  ${code.verification_uri_complete}`, `(or open ${code.verification_uri} and enter the code)`);
  } else {
    lines.push(`Open ${code.verification_uri} in a browser, enter the code and approve the login.`);
  }
  if (offerBrowser) lines.push(PRESS_ENTER);
  lines.push("Waiting for approval... (Ctrl-C to cancel)");
  return lines.join("\n");
}

/**
 * Token mode (spec §4.8): the token is stored as given. IAM's whoami fills in who it stands for; a
 * token IAM rejects (401) is refused, and when IAM cannot answer the token is stored for `ci-user`.
 */
async function loginWithToken(ctx: Context, iamUrl: string, given: string): Promise<Credential> {
  const token = (given === "-" ? await ctx.readStdinLine("Paste the token and press Enter:") : given).trim();
  if (!token) throw failures.noToken();
  const fallbackExpiry = new Date(ctx.now() + TOKEN_MODE_DAYS * 86_400_000).toISOString();

  let why: string;
  try {
    const answer = await ctx.iam(iamUrl).whoami(token);
    if ("identity" in answer) return credentialOf(answer.identity, { token, refreshToken: null, iamUrl, fallbackExpiry });
    if (answer.status === 401) throw failures.tokenRejected(iamUrl, [answer.code, answer.message].filter(Boolean).join(": "));
    // a session held back by its organization's policy never meets it later: kept, it would never work
    const hold = await heldBack(ctx, iamUrl, token, answer);
    if (hold) throw failures.heldBack(iamUrl, "this token", answer.message, hold, true);
    why = `HTTP ${answer.status}`;
  } catch (err) {
    if (!(err instanceof Unreachable)) throw err;
    why = err.reason;
  }
  ctx.warn(`Could not look the token up at ${iamUrl} (${why}): keeping it for ${CI_USER}, valid for ${TOKEN_MODE_DAYS} days.`);
  return { token, refreshToken: null, email: CI_USER, platformId: null, role: "", expiresAt: fallbackExpiry, iamUrl, audience: AUDIENCE };
}

function credentialOf(identity: Identity, login: { token: string; refreshToken: string | null; iamUrl: string; fallbackExpiry: string }): Credential {
  const expiresAt = Number.isNaN(Date.parse(identity.expiresAt)) ? login.fallbackExpiry : new Date(identity.expiresAt).toISOString();
  return {
    token: login.token,
    refreshToken: login.refreshToken,
    email: identity.email,
    // whoami answers "" for a user without an organization (spec §2.1: platformId may be null)
    platformId: identity.platformId || null,
    role: identity.role,
    expiresAt,
    iamUrl: login.iamUrl,
    audience: AUDIENCE,
  };
}
