import { ConfigError, mailConfig, persistentSecret, positiveIntEnv, trustedProxyHops, type CommonConfig } from "@core/kit";
import { namesPrivateAddress, type Resolver } from "@core/webhooks";

export interface IamConfig {
  iamUrl: string;
  registryUrl: string;
  authSecret: string;
  trustedOrigins: string[];
  /** where the sign-in pages may send a browser back to besides IAM's own paths: billing's invoice and portal pages (DESIGN §6.11), and the trusted origins */
  returnOrigins: string[];
  /** which OpenID Connect providers organizations may register, and how IAM connects to them (ADR 0026) */
  ssoProviders: SsoProviderConfig;
  secureCookies: boolean;
  sessionSeconds: number;
  /** an organization set-up interrupted this long ago is finished or rolled back (longer than any set-up request runs) */
  orgSetupRecoveryMs: number;
  invitationSeconds: number;
  bootstrapToken: string | undefined;
  /** the device flow's activation page (spec {activation_url}; DESIGN §1: {iam_url}/device) */
  activationUrl: string;
  /** RFC 8628 device code lifetime and polling interval (DESIGN §5: 10 minutes, 5 s) */
  deviceCodeSeconds: number;
  deviceIntervalSeconds: number;
  /** CLI access token (an IAM session) and refresh token lifetimes (DESIGN §5: 1 hour, 30 days) */
  accessTokenSeconds: number;
  refreshTokenSeconds: number;
  /** the vault's MCP endpoint: the one resource (RFC 8707) IAM issues OAuth access tokens for (ADR 0028) */
  vaultResource: string;
  /** lifetime of an OAuth access token for the vault (a JWT: revocation waits for its expiry, so minutes) */
  oauthAccessTokenSeconds: number;
  /** Client ID Metadata Documents: https client ids resolved from the document at that address (client-metadata.ts) */
  clientMetadata: ClientMetadataConfig;
  smtpUrl: string | undefined;
  mailFrom: string;
  outboxDir: string;
  /** CORE_IAM_WEBHOOK_ALLOW_PRIVATE: audit endpoints may be loopback and private addresses (default: on the embedded database only, as billing's) */
  auditWebhookAllowPrivate: boolean;
  rateLimits: {
    enabled: boolean;
    windowSeconds: number;
    signIn: number;
    signUp: number;
    magicLink: number;
    /** failed API key validations per caller and window */
    apiKeyFailures: number;
    /** wrong user codes entered on the activation page, per user and window */
    userCodeFailures: number;
    /** passkey ceremonies (options and verification, registration and sign-in) per client and window */
    passkey: number;
    /** single sign-on starts per client address and window */
    ssoStart: number;
    /** two-factor requests (codes, enrolment, disable, backup codes) per client address, route and window */
    twoFactor: number;
    /** OAuth client registrations (RFC 7591, unauthenticated) per client address and window */
    clientRegistration: number;
  };
}

export interface ClientMetadataConfig {
  /** CORE_OAUTH_CLIENT_METADATA=on|off (default on) */
  enabled: boolean;
  /** how long a document's host has to answer, body included */
  timeoutMs: number;
  /** documents on loopback and private addresses: a test seam, never read from the environment (the SSRF guard stays on) */
  allowPrivate: boolean;
  /** certificate authorities trusted instead of the system's: a test seam for a local https document server */
  ca?: string;
}

export interface SsoProviderConfig {
  /** CORE_SSO_PROVIDER_ORIGINS: when set, the only origins a provider may be at; null: any the other rules allow */
  origins: string[] | null;
  /** CORE_IAM_SSO_ALLOW_PRIVATE: providers over http, and at loopback or private addresses (default: on the embedded database only, as for webhooks) */
  allowPrivate: boolean;
  /** how long a provider has to answer: the discovery document, body included; each connection, answer and pause of the plugin's requests */
  timeoutMs: number;
  /** the resolver the SSRF guard asks instead of the system's: a test seam, never read from the environment */
  resolve?: Resolver;
  /** certificate authorities trusted instead of the system's: a test seam for a local https provider */
  ca?: string;
}

const isLocal = (url: string) => ["localhost", "127.0.0.1", "[::1]"].includes(new URL(url).hostname);

/** IAM's settings from the environment (README "Configuration"). */
export function loadIamConfig(common: CommonConfig, env: NodeJS.ProcessEnv = process.env): IamConfig {
  const iamUrl = common.url("iam");
  const authSecret = env.CORE_AUTH_SECRET || env.BETTER_AUTH_SECRET || persistentSecret(common.dataDir, "auth");
  if (authSecret.length < 32) throw new ConfigError("CORE_AUTH_SECRET must be at least 32 characters");
  const extraOrigins = (env.CORE_TRUSTED_ORIGINS ?? "")
    .split(",")
    .map((o) => o.trim())
    .filter(Boolean);
  const mail = mailConfig(common, env);
  // read by clientIpOf on each request; a wrong value stops start-up here instead
  trustedProxyHops(env);
  return {
    iamUrl,
    registryUrl: common.url("platform-registry"),
    authSecret,
    trustedOrigins: [new URL(iamUrl).origin, ...extraOrigins],
    returnOrigins: [...new Set([new URL(iamUrl).origin, new URL(common.url("billing")).origin, ...extraOrigins])],
    ssoProviders: ssoProviderConfig(common, env),
    secureCookies: !isLocal(iamUrl),
    sessionSeconds: positiveIntEnv(env, "CORE_SESSION_SECONDS", 60 * 60 * 24 * 7),
    orgSetupRecoveryMs: orgSetupRecoverySeconds(env) * 1000,
    invitationSeconds: positiveIntEnv(env, "CORE_INVITATION_SECONDS", 60 * 60 * 24 * 7),
    bootstrapToken: env.CORE_BOOTSTRAP_TOKEN || undefined,
    activationUrl: (env.CORE_ACTIVATION_URL || `${iamUrl}/device`).replace(/\/+$/, ""),
    deviceCodeSeconds: positiveIntEnv(env, "CORE_DEVICE_CODE_SECONDS", 600),
    deviceIntervalSeconds: positiveIntEnv(env, "CORE_DEVICE_INTERVAL_SECONDS", 5),
    accessTokenSeconds: positiveIntEnv(env, "CORE_ACCESS_TOKEN_SECONDS", 3600),
    refreshTokenSeconds: positiveIntEnv(env, "CORE_REFRESH_TOKEN_SECONDS", 30 * 86400),
    vaultResource: `${common.url("vault")}/mcp`,
    oauthAccessTokenSeconds: 600,
    clientMetadata: { enabled: onOff(env, "CORE_OAUTH_CLIENT_METADATA", true), timeoutMs: 5000, allowPrivate: false },
    smtpUrl: mail.smtpUrl,
    mailFrom: mail.from,
    outboxDir: mail.outboxDir,
    auditWebhookAllowPrivate: allowPrivate(common, env, "CORE_IAM_WEBHOOK_ALLOW_PRIVATE"),
    rateLimits: {
      enabled: env.CORE_RATE_LIMIT !== "off",
      windowSeconds: positiveIntEnv(env, "CORE_RATE_LIMIT_WINDOW_SECONDS", 60),
      signIn: positiveIntEnv(env, "CORE_RATE_LIMIT_SIGN_IN", 10),
      signUp: positiveIntEnv(env, "CORE_RATE_LIMIT_SIGN_UP", 5),
      magicLink: positiveIntEnv(env, "CORE_RATE_LIMIT_MAGIC_LINK", 5),
      apiKeyFailures: positiveIntEnv(env, "CORE_RATE_LIMIT_APIKEY_FAILURES", 30),
      userCodeFailures: positiveIntEnv(env, "CORE_RATE_LIMIT_USER_CODE_FAILURES", 10),
      passkey: positiveIntEnv(env, "CORE_RATE_LIMIT_PASSKEY", 20),
      ssoStart: positiveIntEnv(env, "CORE_RATE_LIMIT_SSO_START", 10),
      twoFactor: positiveIntEnv(env, "CORE_RATE_LIMIT_TWO_FACTOR", 5),
      clientRegistration: positiveIntEnv(env, "CORE_RATE_LIMIT_CLIENT_REGISTRATION", 10),
    },
  };
}

/** CORE_ORG_SETUP_RECOVERY_SECONDS: at least 15, since the registry call of a set-up may take 10 s. */
function orgSetupRecoverySeconds(env: NodeJS.ProcessEnv): number {
  const seconds = positiveIntEnv(env, "CORE_ORG_SETUP_RECOVERY_SECONDS", 60);
  if (seconds < 15) throw new ConfigError(`CORE_ORG_SETUP_RECOVERY_SECONDS must be at least 15 (a set-up's registry call may take 10 s), got ${seconds}`);
  return seconds;
}

/** A setting that is `on` or `off`; unset is the default, anything else stops start-up. */
function onOff(env: NodeJS.ProcessEnv, name: string, byDefault: boolean): boolean {
  const value = env[name] ?? "";
  if (!["", "on", "off"].includes(value)) throw new ConfigError(`${name} must be on or off, got "${value.slice(0, 40)}"`);
  return value === "" ? byDefault : value === "on";
}

/** Development on the embedded database reaches servers on localhost; with PostgreSQL (production) only when told (billing's rule). */
function allowPrivate(common: CommonConfig, env: NodeJS.ProcessEnv, name: string): boolean {
  const value = env[name] ?? "";
  if (!["", "0", "1"].includes(value)) throw new ConfigError(`${name} must be 1, 0 or unset, got "${value.slice(0, 40)}"`);
  return value === "" ? !common.databaseUrl : value === "1";
}

/**
 * Single sign-on providers (ADR 0026): any https origin that resolves to a public address, narrowed
 * to CORE_SSO_PROVIDER_ORIGINS when it is set. A listed origin that could never be used (http, or a
 * loopback or private address written in it, without CORE_IAM_SSO_ALLOW_PRIVATE=1) stops start-up.
 */
function ssoProviderConfig(common: CommonConfig, env: NodeJS.ProcessEnv): SsoProviderConfig {
  const allowed = allowPrivate(common, env, "CORE_IAM_SSO_ALLOW_PRIVATE");
  const listed = originsOf(env.CORE_SSO_PROVIDER_ORIGINS, "CORE_SSO_PROVIDER_ORIGINS");
  if (!allowed) {
    for (const origin of listed) {
      const { protocol, hostname } = new URL(origin);
      if (protocol !== "https:" || namesPrivateAddress(hostname)) {
        throw new ConfigError(`CORE_SSO_PROVIDER_ORIGINS lists ${origin}, but providers over http or at loopback and private addresses need CORE_IAM_SSO_ALLOW_PRIVATE=1`);
      }
    }
  }
  return { origins: listed.length > 0 ? listed : null, allowPrivate: allowed, timeoutMs: 10_000 };
}

/** A comma-separated list of origins (scheme, host, port), each checked; a path or junk stops start-up. */
function originsOf(value: string | undefined, name: string): string[] {
  return (value ?? "")
    .split(",")
    .map((o) => o.trim())
    .filter(Boolean)
    .map((o) => {
      let url: URL;
      try {
        url = new URL(o);
      } catch {
        throw new ConfigError(`${name} must list origins like https://idp.example.com, got ${JSON.stringify(o)}`);
      }
      if (!/^https?:$/.test(url.protocol) || url.origin !== o.replace(/\/$/, "")) throw new ConfigError(`${name} must list origins like https://idp.example.com, got ${JSON.stringify(o)}`);
      return url.origin;
    });
}
