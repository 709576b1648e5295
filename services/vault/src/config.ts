import { existsSync, statSync } from "node:fs";
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { ConfigError } from "@core/kit";

/** The project's own vault; the same relative place from `src/` and from `dist/`. */
export const DEFAULT_VAULT_DIR = fileURLToPath(new URL("../../../docs/vault", import.meta.url));

export interface VaultConfig {
  /** the folder of markdown served (`VAULT_DIR`, default the project's `docs/vault`) */
  dir: string;
}

/** Environment → the vault's config; fails fast when the folder is missing (DESIGN §1). */
export function loadVaultConfig(env: NodeJS.ProcessEnv = process.env): VaultConfig {
  const dir = env.VAULT_DIR ? resolve(env.VAULT_DIR) : DEFAULT_VAULT_DIR;
  if (!existsSync(dir) || !statSync(dir).isDirectory()) {
    throw new ConfigError(`VAULT_DIR must name a folder of markdown documents; ${dir} is not a folder`);
  }
  return { dir };
}
