import { join } from "node:path";
import { ConfigError, persistentSecret, type CommonConfig } from "@core/kit";

export interface IamConfig {
  iamUrl: string;
  registryUrl: string;
  authSecret: string;
  trustedOrigins: string[];
  secureCookies: boolean;
  sessionSeconds: number;
  invitationSeconds: number;
  bootstrapToken: string | undefined;
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
  };
}

const isLocal = (url: string) => ["localhost", "127.0.0.1", "[::1]"].includes(new URL(url).hostname);

function positiveInt(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value <= 0) throw new ConfigError(`${name} must be a positive integer, got "${raw}"`);
  return value;
}

/** IAM's settings from the environment (README "Configuration"). */
export function loadIamConfig(common: CommonConfig, env: NodeJS.ProcessEnv = process.env): IamConfig {
  const iamUrl = common.url("iam");
  const authSecret = env.BETTER_AUTH_SECRET || env.CORE_AUTH_SECRET || persistentSecret(common.dataDir, "auth");
  if (authSecret.length < 32) throw new ConfigError("CORE_AUTH_SECRET must be at least 32 characters");
  const extraOrigins = (env.CORE_TRUSTED_ORIGINS ?? "")
    .split(",")
    .map((o) => o.trim())
    .filter(Boolean);
  return {
    iamUrl,
    registryUrl: common.url("platform-registry"),
    authSecret,
    trustedOrigins: [new URL(iamUrl).origin, ...extraOrigins],
    secureCookies: !isLocal(iamUrl),
    sessionSeconds: positiveInt(env, "CORE_SESSION_SECONDS", 60 * 60 * 24 * 7),
    invitationSeconds: positiveInt(env, "CORE_INVITATION_SECONDS", 60 * 60 * 24 * 7),
    bootstrapToken: env.CORE_BOOTSTRAP_TOKEN || undefined,
    smtpUrl: env.SMTP_URL || undefined,
    mailFrom: env.CORE_MAIL_FROM || "Core <no-reply@localhost>",
    outboxDir: join(common.dataDir, "outbox"),
    rateLimits: {
      enabled: env.CORE_RATE_LIMIT !== "off",
      windowSeconds: positiveInt(env, "CORE_RATE_LIMIT_WINDOW_SECONDS", 60),
      signIn: positiveInt(env, "CORE_RATE_LIMIT_SIGN_IN", 10),
      signUp: positiveInt(env, "CORE_RATE_LIMIT_SIGN_UP", 5),
      magicLink: positiveInt(env, "CORE_RATE_LIMIT_MAGIC_LINK", 5),
      apiKeyFailures: positiveInt(env, "CORE_RATE_LIMIT_APIKEY_FAILURES", 30),
    },
  };
}
