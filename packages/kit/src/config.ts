import { randomBytes } from "node:crypto";
import { existsSync, linkSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";

/**
 * The services of DESIGN §1 and the names of their settings (DESIGN §10): `CORE_<SERVICE>_PORT` and
 * `CORE_<SERVICE>_URL` for each. Each one's default port is `CORE_BASE_PORT` (4100) plus its offset.
 * `formerUrlVar` is the name an address had before, still read when the new one is unset.
 */
export const SERVICES = {
  iam: { offset: 0, portVar: "CORE_IAM_PORT", urlVar: "CORE_IAM_URL" },
  billing: { offset: 100, portVar: "CORE_BILLING_PORT", urlVar: "CORE_BILLING_URL" },
  "stack-registry": { offset: 200, portVar: "CORE_STACK_REGISTRY_PORT", urlVar: "CORE_STACK_REGISTRY_URL" },
  "platform-registry": { offset: 300, portVar: "CORE_PLATFORM_REGISTRY_PORT", urlVar: "CORE_PLATFORM_REGISTRY_URL", formerUrlVar: "CORE_REGISTRY_URL" },
  vault: { offset: 400, portVar: "CORE_VAULT_PORT", urlVar: "CORE_VAULT_URL", formerUrlVar: "CORE_MCP_URL" },
} as const satisfies Record<string, { offset: number; portVar: string; urlVar: string; formerUrlVar?: string }>;

/** IAM's port when nothing is set; the others follow at their offsets (4200, 4300, …). */
export const DEFAULT_BASE_PORT = 4100;
/** How long start-up waits for the database by default (`CORE_DB_WAIT_SECONDS`). */
export const DEFAULT_DB_WAIT_SECONDS = 60;
/** How long a query waits for a pooled PostgreSQL connection by default (`CORE_DB_POOL_WAIT_SECONDS`). */
export const DEFAULT_DB_POOL_WAIT_SECONDS = 5;

export type ServiceName = keyof typeof SERVICES;

export interface CommonConfig {
  host: string;
  dataDir: string;
  databaseUrl: string | undefined;
  /** how long start-up retries a database that does not answer (`CORE_DB_WAIT_SECONDS`; 0: one try) */
  databaseWaitSeconds: number;
  /** how long a query waits for a PostgreSQL connection of the pool before it fails as unavailable, a 503 (`CORE_DB_POOL_WAIT_SECONDS`) */
  databasePoolWaitSeconds: number;
  port(service: ServiceName): number;
  /** the public base URL of a service (`CORE_<NAME>_URL` or its former name, else http://localhost:<port>) */
  url(service: ServiceName): string;
}

export class ConfigError extends Error {
  override name = "ConfigError";
}

/** A positive integer setting from the environment, `fallback` when unset or empty; else a ConfigError naming it. */
export function positiveIntEnv(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value <= 0) throw new ConfigError(`${name} must be a positive integer, got "${raw}"`);
  return value;
}

/** An integer setting from `min` to `max`, `fallback` when unset or empty; else a ConfigError naming it. */
function integerEnv(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number, max: number, what: string): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  const value = Number(raw);
  if (!/^[0-9]+$/.test(raw.trim()) || value < min || value > max) throw new ConfigError(`${name} must be ${what} (${min}-${max}), got "${raw}"`);
  return value;
}

/** Environment → the settings every service shares (DESIGN §1). Fails fast with a clear message. */
export function loadCommonConfig(env: NodeJS.ProcessEnv = process.env): CommonConfig {
  const host = env.CORE_HOST || "127.0.0.1";
  const dataDir = resolve(env.CORE_DATA_DIR || "./.data");
  const databaseUrl = env.DATABASE_URL || undefined;
  if (databaseUrl && !/^postgres(ql)?:\/\//.test(databaseUrl)) {
    throw new ConfigError("DATABASE_URL must be a postgres:// or postgresql:// URL");
  }
  const basePort = integerEnv(env, "CORE_BASE_PORT", DEFAULT_BASE_PORT, 1, 65535 - SERVICES.vault.offset, "a port number");
  const databaseWaitSeconds = integerEnv(env, "CORE_DB_WAIT_SECONDS", DEFAULT_DB_WAIT_SECONDS, 0, 86_400, "a number of seconds");
  const databasePoolWaitSeconds = integerEnv(env, "CORE_DB_POOL_WAIT_SECONDS", DEFAULT_DB_POOL_WAIT_SECONDS, 1, 600, "a number of seconds");
  const port = (service: ServiceName) => integerEnv(env, SERVICES[service].portVar, basePort + SERVICES[service].offset, 0, 65535, "a port number");
  const url = (service: ServiceName) => {
    const spec: { urlVar: string; formerUrlVar?: string } = SERVICES[service];
    // the new name wins when both are set
    const name = env[spec.urlVar] ? spec.urlVar : spec.formerUrlVar && env[spec.formerUrlVar] ? spec.formerUrlVar : null;
    if (name) {
      const raw = env[name]!;
      try {
        const parsed = new URL(raw);
        // the vault's address names its /mcp endpoint (spec §4.7); the base is what we serve from
        return service === "vault" ? parsed.origin : raw.replace(/\/+$/, "");
      } catch {
        throw new ConfigError(`${name} must be a URL, got "${raw}"`);
      }
    }
    return `http://localhost:${port(service)}`;
  };
  // fail fast: a bad port or address is reported at start-up, not when a service first needs it
  for (const service of Object.keys(SERVICES) as ServiceName[]) {
    port(service);
    url(service);
  }
  return { host, dataDir, databaseUrl, databaseWaitSeconds, databasePoolWaitSeconds, port, url };
}

/**
 * A secret generated once and kept in the data directory (mode 0600), for the embedded mode where
 * nobody configured one: the auth secret and the built-in service credentials.
 */
export function persistentSecret(dataDir: string, name: string): string {
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const file = join(dataDir, `${name}.secret`);
  if (!existsSync(file)) {
    const secret = randomBytes(32).toString("base64url");
    // written whole under a name of its own, then linked into place: replicas starting together
    // never read a file another is still writing, and the first link wins
    const draft = `${file}.${process.pid}.${randomBytes(4).toString("hex")}`;
    writeFileSync(draft, `${secret}\n`, { mode: 0o600, flag: "wx" });
    try {
      linkSync(draft, file);
      return secret;
    } catch (err) {
      // another process created it first: use theirs
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    } finally {
      rmSync(draft, { force: true });
    }
  }
  const kept = readFileSync(file, "utf8").trim();
  // an empty secret would sign sessions with nothing
  if (!kept) throw new ConfigError(`The secret file ${file} is empty; delete it to generate a new secret`);
  return kept;
}
