import { homedir } from "node:os";
import { join } from "node:path";
import { failures } from "./failures.js";

/** The default IAM address (spec {iam_url}; DESIGN §1). */
export const DEFAULT_IAM_URL = "http://localhost:4100";
/** Device-flow polling gives up after 5 minutes (spec §8). */
const LOGIN_TIMEOUT_SECONDS = 300;

/** What the environment says (README "The core CLI"). */
export interface Settings {
  /** `CORE_HOME`, else `~/.core` (DESIGN §5) */
  home: string;
  credentialsPath: string;
  /** `CORE_IAM_URL`, unparsed */
  iamUrlFromEnv: string | undefined;
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
  if (flag !== undefined) return normalizeIamUrl(flag, "--iam-url");
  if (settings.iamUrlFromEnv !== undefined) return normalizeIamUrl(settings.iamUrlFromEnv, "CORE_IAM_URL");
  return DEFAULT_IAM_URL;
}

/** An http(s) base address without a trailing slash; it may carry a path prefix. */
export function normalizeIamUrl(value: string, from: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw failures.invalidIamUrl(value, from);
  }
  if ((url.protocol !== "http:" && url.protocol !== "https:") || url.search || url.hash) throw failures.invalidIamUrl(value, from);
  return url.href.replace(/\/+$/, "");
}
