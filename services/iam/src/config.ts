import { ConfigError, mailConfig, persistentSecret, positiveIntEnv, trustedProxyHops, type CommonConfig } from "@core/kit";

export interface IamConfig {
  iamUrl: string;
  registryUrl: string;
  authSecret: string;
  trustedOrigins: string[];
  /** where the sign-in pages may send a browser back to besides IAM's own paths: billing's invoice and portal pages (DESIGN §6.11), and the trusted origins */
  returnOrigins: string[];
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
  smtpUrl: string | undefined;
  mailFrom: string;
  outboxDir: string;
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
    /** two-factor requests (codes, enrolment, disable, backup codes) per client address, route and window */
    twoFactor: number;
  };
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
    smtpUrl: mail.smtpUrl,
    mailFrom: mail.from,
    outboxDir: mail.outboxDir,
    rateLimits: {
      enabled: env.CORE_RATE_LIMIT !== "off",
      windowSeconds: positiveIntEnv(env, "CORE_RATE_LIMIT_WINDOW_SECONDS", 60),
      signIn: positiveIntEnv(env, "CORE_RATE_LIMIT_SIGN_IN", 10),
      signUp: positiveIntEnv(env, "CORE_RATE_LIMIT_SIGN_UP", 5),
      magicLink: positiveIntEnv(env, "CORE_RATE_LIMIT_MAGIC_LINK", 5),
      apiKeyFailures: positiveIntEnv(env, "CORE_RATE_LIMIT_APIKEY_FAILURES", 30),
      userCodeFailures: positiveIntEnv(env, "CORE_RATE_LIMIT_USER_CODE_FAILURES", 10),
      twoFactor: positiveIntEnv(env, "CORE_RATE_LIMIT_TWO_FACTOR", 5),
    },
  };
}

/** CORE_ORG_SETUP_RECOVERY_SECONDS: at least 15, since the registry call of a set-up may take 10 s. */
function orgSetupRecoverySeconds(env: NodeJS.ProcessEnv): number {
  const seconds = positiveIntEnv(env, "CORE_ORG_SETUP_RECOVERY_SECONDS", 60);
  if (seconds < 15) throw new ConfigError(`CORE_ORG_SETUP_RECOVERY_SECONDS must be at least 15 (a set-up's registry call may take 10 s), got ${seconds}`);
  return seconds;
}
