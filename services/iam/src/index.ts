import { fileURLToPath } from "node:url";
import type { BuiltService, ServiceContext } from "@core/kit";
import type { Db } from "@core/storage";
import { createApp } from "./app.js";
import { loadIamConfig } from "./config.js";

export const SERVICE_ID = "iam";

/** this service's committed migrations (next to `src/` and `dist/` alike) */
export const migrationsFolder = fileURLToPath(new URL("../drizzle", import.meta.url));

/** Builds IAM from the launcher's context (DESIGN §1). */
export async function buildService(ctx: ServiceContext<Db>): Promise<BuiltService> {
  const config = loadIamConfig(ctx.common, ctx.env);
  const app = createApp({
    db: ctx.db,
    logger: ctx.logger,
    config,
    serviceCredentials: ctx.serviceCredentials,
    healthChecks: [{ name: "database", check: ctx.pingDatabase }],
  });
  return { fetch: app.fetch, omitsErrorDetails: app.omitsErrorDetails, close: async () => {} };
}
