import { ServiceMetrics, type BuiltService, type ServiceContext } from "@core/kit";
import { iamBackedDeps } from "@core/service-auth";
import { VaultAccess } from "./access.js";
import { createApp } from "./app.js";
import { loadVaultConfig } from "./config.js";
import { McpSessions } from "./sessions.js";
import { Vault } from "./vault.js";

export const SERVICE_ID = "vault";

/** No tables: the vault is a folder of markdown indexed in memory (DESIGN §1). */
export const migrationsFolder = undefined;

/** Builds the vault tool server from the launcher's context (DESIGN §1, §8). */
export async function buildService(ctx: ServiceContext): Promise<BuiltService> {
  const config = loadVaultConfig(ctx.env);
  // with auth, the vault checks session tokens and API keys with IAM like every resource service,
  // and access tokens against IAM's keys (it has no database: the health checks are not taken)
  const iam = config.auth === "required" ? iamBackedDeps(ctx, SERVICE_ID) : undefined;
  const vault = await Vault.open(config.dir, {
    onIndexed: ({ kind, documents, touched, ms }) =>
      ctx.logger.info({ dir: config.dir, kind, documents, touched, ms: Math.round(ms) }, kind === "full" ? "vault indexed" : "vault re-indexed changed files"),
  });
  const access = iam && new VaultAccess({ resource: `${ctx.common.url("vault")}/mcp`, issuer: ctx.common.url("iam"), keys: iam.keys, credentials: iam.credentials });
  const sessions = new McpSessions(vault);
  const app = createApp({
    vault,
    logger: ctx.logger,
    access,
    sessions,
    metrics: new ServiceMetrics(SERVICE_ID, { processMetrics: true }),
    // /health stays the folder's: with IAM away, access tokens still verify against the keys held,
    // so IAM is the readiness check's (its keys known once), not the health's
    ...(iam ? { readinessChecks: iam.readinessChecks } : {}),
  });
  return {
    fetch: app.fetch,
    close: async () => {
      await sessions.close();
      vault.close();
    },
  };
}
