import { fileURLToPath } from "node:url";
import { ServiceMetrics, type BuiltService, type ServiceContext } from "@core/kit";
import { iamBackedDeps } from "@core/service-auth";
import { databaseReadyCheck, poolStats, type Db } from "@core/storage";
import { createApp } from "./app.js";

export const SERVICE_ID = "stack-registry";

/** this service's committed migrations (next to `src/` and `dist/` alike) */
export const migrationsFolder = fileURLToPath(new URL("../drizzle", import.meta.url));

/** Builds the stack registry from the launcher's context (DESIGN §1). */
export async function buildService(ctx: ServiceContext<Db>): Promise<BuiltService> {
  const iam = iamBackedDeps(ctx, SERVICE_ID);
  const app = createApp({
    db: ctx.db,
    logger: ctx.logger,
    ...iam,
    readinessChecks: [databaseReadyCheck(ctx.db, SERVICE_ID, migrationsFolder), ...iam.readinessChecks],
    metrics: new ServiceMetrics(SERVICE_ID, { processMetrics: true, databasePool: () => poolStats(ctx.db) }),
  });
  return { fetch: app.fetch, close: async () => {} };
}
