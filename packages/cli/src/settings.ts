import { homedir } from "node:os";
import { join } from "node:path";
import { failures } from "./failures.js";

/** The default IAM address (spec {iam_url}; DESIGN §1). */
export const DEFAULT_IAM_URL = "http://localhost:4100";
/** The default stack registry address (spec {stack_registry_url}; DESIGN §1). */
export const DEFAULT_STACK_REGISTRY_URL = "http://localhost:4300";
/** The default billing address (spec {billing_url}; DESIGN §1). */
export const DEFAULT_BILLING_URL = "http://localhost:4200";
/** Device-flow polling gives up after 5 minutes (spec §8). */
const LOGIN_TIMEOUT_SECONDS = 300;

/** What the environment says (README "The core CLI"). */
export interface Settings {
  /** `CORE_HOME`, else `~/.core` (DESIGN §5) */
  home: string;
  credentialsPath: string;
  /** `CORE_IAM_URL`, unparsed */
  iamUrlFromEnv: string | undefined;
  /** `CORE_STACK_REGISTRY_URL`, unparsed */
  stackRegistryUrlFromEnv: string | undefined;
  /** `CORE_BILLING_URL`, unparsed */
  billingUrlFromEnv: string | undefined;
  /** `CORE_TOKEN`: used instead of the stored credential (for CI) */
  envToken: string | undefined;
  /** `CORE_LOGIN_TIMEOUT_SECONDS`: the 5-minute polling limit, shorter in tests */
  loginTimeoutMs: number;
  /** `CORE_DEBUG=1`: one stderr line per request to IAM, stacks of unexpected errors */
  debug: boolean;
}

export function readSettings(env: NodeJS.ProcessEnv): Settings {
  const home = env.CORE_HOME || join(homedir(), ".core");
  return {
    home,
    credentialsPath: join(home, "credentials.json"),
    iamUrlFromEnv: env.CORE_IAM_URL || undefined,
    stackRegistryUrlFromEnv: env.CORE_STACK_REGISTRY_URL || undefined,
    billingUrlFromEnv: env.CORE_BILLING_URL || undefined,
    envToken: env.CORE_TOKEN?.trim() || undefined,
    loginTimeoutMs: positiveSeconds(env, "CORE_LOGIN_TIMEOUT_SECONDS", LOGIN_TIMEOUT_SECONDS) * 1000,
    debug: env.CORE_DEBUG === "1",
  };
}

function positiveSeconds(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value <= 0) throw failures.invalidSetting(name, raw, "a positive number of seconds");
  return value;
}

/** Spec §4.8: the `--iam-url` flag, then `CORE_IAM_URL`, then the default address. */
export function resolveIamUrl(flag: string | undefined, settings: Settings): string {
  if (flag !== undefined) return normalizeBaseUrl(flag, "--iam-url", "IAM");
  if (settings.iamUrlFromEnv !== undefined) return normalizeBaseUrl(settings.iamUrlFromEnv, "CORE_IAM_URL", "IAM");
  return DEFAULT_IAM_URL;
}

/** The same order for the stack registry: `--registry-url`, then `CORE_STACK_REGISTRY_URL`, then the default. */
export function resolveStackRegistryUrl(flag: string | undefined, settings: Settings): string {
  if (flag !== undefined) return normalizeBaseUrl(flag, "--registry-url", "stack registry");
  if (settings.stackRegistryUrlFromEnv !== undefined) return normalizeBaseUrl(settings.stackRegistryUrlFromEnv, "CORE_STACK_REGISTRY_URL", "stack registry");
  return DEFAULT_STACK_REGISTRY_URL;
}

/** And for billing: `--billing-url`, then `CORE_BILLING_URL`, then the default. */
export function resolveBillingUrl(flag: string | undefined, settings: Settings): string {
  if (flag !== undefined) return normalizeBaseUrl(flag, "--billing-url", "billing");
  if (settings.billingUrlFromEnv !== undefined) return normalizeBaseUrl(settings.billingUrlFromEnv, "CORE_BILLING_URL", "billing");
  return DEFAULT_BILLING_URL;
}

/** An http(s) base address without a trailing slash; it may carry a path prefix. */
export function normalizeBaseUrl(value: string, from: string, server: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw failures.invalidAddress(server, value, from);
  }
  if ((url.protocol !== "http:" && url.protocol !== "https:") || url.search || url.hash) throw failures.invalidAddress(server, value, from);
  return url.href.replace(/\/+$/, "");
}
