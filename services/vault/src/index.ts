import { ServiceMetrics, type BuiltService, type ServiceContext } from "@core/kit";
import { createApp } from "./app.js";
import { loadVaultConfig } from "./config.js";
import { Vault } from "./vault.js";

export const SERVICE_ID = "vault";

/** No tables: the vault is a folder of markdown indexed in memory (DESIGN §1). */
export const migrationsFolder = undefined;

/** Builds the vault tool server from the launcher's context (DESIGN §1, §8). */
export async function buildService(ctx: ServiceContext): Promise<BuiltService> {
  const config = loadVaultConfig(ctx.env);
  const vault = await Vault.open(config.dir, {
    onIndexed: ({ kind, documents, touched, ms }) =>
      ctx.logger.info({ dir: config.dir, kind, documents, touched, ms: Math.round(ms) }, kind === "full" ? "vault indexed" : "vault re-indexed changed files"),
  });
  const app = createApp({ vault, logger: ctx.logger, metrics: new ServiceMetrics(SERVICE_ID, { processMetrics: true }) });
  return { fetch: app.fetch, close: async () => vault.close() };
}
