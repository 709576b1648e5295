import { randomBytes } from "node:crypto";
import { existsSync, linkSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";

/** The services of DESIGN §1, their default ports and the environment variable of each address. */
export const SERVICES = {
  iam: { port: 4100, urlVar: "CORE_IAM_URL", portVar: "CORE_IAM_PORT" },
  billing: { port: 4200, urlVar: "CORE_BILLING_URL", portVar: "CORE_BILLING_PORT" },
  "stack-registry": { port: 4300, urlVar: "CORE_STACK_REGISTRY_URL", portVar: "CORE_STACK_REGISTRY_PORT" },
  "platform-registry": { port: 4400, urlVar: "CORE_REGISTRY_URL", portVar: "CORE_PLATFORM_REGISTRY_PORT" },
  vault: { port: 4500, urlVar: "CORE_MCP_URL", portVar: "CORE_VAULT_PORT" },
} as const;

export type ServiceName = keyof typeof SERVICES;

export interface CommonConfig {
  host: string;
  dataDir: string;
  databaseUrl: string | undefined;
  port(service: ServiceName): number;
  /** the public base URL of a service (`CORE_<NAME>_URL`, else http://localhost:<port>) */
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

/** Environment → the settings every service shares (DESIGN §1). Fails fast with a clear message. */
export function loadCommonConfig(env: NodeJS.ProcessEnv = process.env): CommonConfig {
  const host = env.CORE_HOST || "127.0.0.1";
  const dataDir = resolve(env.CORE_DATA_DIR || "./.data");
  const databaseUrl = env.DATABASE_URL || undefined;
  if (databaseUrl && !/^postgres(ql)?:\/\//.test(databaseUrl)) {
    throw new ConfigError("DATABASE_URL must be a postgres:// or postgresql:// URL");
  }
  const port = (service: ServiceName) => {
    const spec = SERVICES[service];
    const raw = env[spec.portVar];
    if (raw === undefined || raw === "") return spec.port;
    const value = Number(raw);
    if (!Number.isInteger(value) || value < 0 || value > 65535) {
      throw new ConfigError(`${spec.portVar} must be a port number (0-65535), got "${raw}"`);
    }
    return value;
  };
  const url = (service: ServiceName) => {
    const raw = env[SERVICES[service].urlVar];
    if (raw) {
      try {
        const parsed = new URL(raw);
        // the vault's address names its /mcp endpoint (spec §4.7); the base is what we serve from
        return service === "vault" ? parsed.origin : raw.replace(/\/+$/, "");
      } catch {
        throw new ConfigError(`${SERVICES[service].urlVar} must be a URL, got "${raw}"`);
      }
    }
    return `http://localhost:${port(service)}`;
  };
  // fail fast: a bad port or address is reported at start-up, not when a service first needs it
  for (const service of Object.keys(SERVICES) as ServiceName[]) {
    port(service);
    url(service);
  }
  return { host, dataDir, databaseUrl, port, url };
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
