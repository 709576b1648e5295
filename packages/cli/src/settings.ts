import { homedir } from "node:os";
import { join } from "node:path";
import { failures } from "./failures.js";

/** The default IAM address (spec {iam_url}; DESIGN §1). */
export const DEFAULT_IAM_URL = "http://localhost:4100";
/** `CORE_BASE_PORT` when unset: IAM's port, the others at their offsets (the services' one knob, DESIGN §10). */
const DEFAULT_BASE_PORT = 4100;
const OFFSETS = { iam: 0, billing: 100, stackRegistry: 200 } as const;
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
  /** `CORE_BASE_PORT`: the default addresses follow a local copy moved with it, as the services do */
  basePort: number;
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
    basePort: basePortOf(env),
    envToken: env.CORE_TOKEN?.trim() || undefined,
    loginTimeoutMs: positiveSeconds(env, "CORE_LOGIN_TIMEOUT_SECONDS", LOGIN_TIMEOUT_SECONDS) * 1000,
    debug: env.CORE_DEBUG === "1",
  };
}

function basePortOf(env: NodeJS.ProcessEnv): number {
  const raw = env.CORE_BASE_PORT;
  if (raw === undefined || raw === "") return DEFAULT_BASE_PORT;
  const value = Number(raw);
  if (!/^\d{1,5}$/.test(raw) || value < 1 || value > 65535 - 400) throw failures.invalidSetting("CORE_BASE_PORT", raw, "a port number");
  return value;
}

/** A service's address on this machine when nothing names it: its port from `CORE_BASE_PORT`. */
const localUrl = (settings: Settings, service: keyof typeof OFFSETS) => `http://localhost:${settings.basePort + OFFSETS[service]}`;

function positiveSeconds(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value <= 0) throw failures.invalidSetting(name, raw, "a positive number of seconds");
  return value;
}

/** Spec §4.8: the `--iam-url` flag, then `CORE_IAM_URL`, then the default address (moved by `CORE_BASE_PORT`). */
export function resolveIamUrl(flag: string | undefined, settings: Settings): string {
  if (flag !== undefined) return normalizeBaseUrl(flag, "--iam-url", "IAM");
  if (settings.iamUrlFromEnv !== undefined) return normalizeBaseUrl(settings.iamUrlFromEnv, "CORE_IAM_URL", "IAM");
  return localUrl(settings, "iam");
}

/** The same order for the stack registry: `--registry-url`, then `CORE_STACK_REGISTRY_URL`, then the default. */
export function resolveStackRegistryUrl(flag: string | undefined, settings: Settings): string {
  if (flag !== undefined) return normalizeBaseUrl(flag, "--registry-url", "stack registry");
  if (settings.stackRegistryUrlFromEnv !== undefined) return normalizeBaseUrl(settings.stackRegistryUrlFromEnv, "CORE_STACK_REGISTRY_URL", "stack registry");
  return localUrl(settings, "stackRegistry");
}

/** And for billing: `--billing-url`, then `CORE_BILLING_URL`, then the default. */
export function resolveBillingUrl(flag: string | undefined, settings: Settings): string {
  if (flag !== undefined) return normalizeBaseUrl(flag, "--billing-url", "billing");
  if (settings.billingUrlFromEnv !== undefined) return normalizeBaseUrl(settings.billingUrlFromEnv, "CORE_BILLING_URL", "billing");
  return localUrl(settings, "billing");
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
