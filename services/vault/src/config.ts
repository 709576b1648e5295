import { existsSync, statSync } from "node:fs";
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { ConfigError } from "@core/kit";

/** The project's own vault; the same relative place from `src/` and from `dist/`. */
export const DEFAULT_VAULT_DIR = fileURLToPath(new URL("../../../docs/vault", import.meta.url));

/** Whether MCP requests need a credential (issue 29, ADR 0028). */
export type VaultAuthMode = "required" | "off";

export interface VaultConfig {
  /** the folder of markdown served (`VAULT_DIR`, default the project's `docs/vault`) */
  dir: string;
  /**
   * `CORE_VAULT_AUTH`: `required` by default with `DATABASE_URL` (a deployment), `off` by default on
   * the embedded database, so `npm start` stays one command with nothing to sign in to
   */
  auth: VaultAuthMode;
}

/** Environment → the vault's config; fails fast when the folder is missing or a value is wrong (DESIGN §1). */
export function loadVaultConfig(env: NodeJS.ProcessEnv = process.env): VaultConfig {
  const dir = env.VAULT_DIR ? resolve(env.VAULT_DIR) : DEFAULT_VAULT_DIR;
  if (!existsSync(dir) || !statSync(dir).isDirectory()) {
    throw new ConfigError(`VAULT_DIR must name a folder of markdown documents; ${dir} is not a folder`);
  }
  const auth = env.CORE_VAULT_AUTH || (env.DATABASE_URL ? "required" : "off");
  if (auth !== "required" && auth !== "off") {
    throw new ConfigError(`CORE_VAULT_AUTH must be required or off, got "${auth}"`);
  }
  return { dir, auth };
}
