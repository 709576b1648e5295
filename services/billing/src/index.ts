import { fileURLToPath } from "node:url";
import { ServiceMetrics, type BuiltService, type ServiceContext } from "@core/kit";
import { iamBackedDeps } from "@core/service-auth";
import { databaseReadyCheck, poolStats, type Db } from "@core/storage";
import { createApp } from "./app.js";
import { loadBillingConfig } from "./config.js";

export const SERVICE_ID = "billing";

/** this service's committed migrations (next to `src/` and `dist/` alike) */
export const migrationsFolder = fileURLToPath(new URL("../drizzle", import.meta.url));

/** Builds billing from the launcher's context (DESIGN §1) and starts its worker in this replica. */
export async function buildService(ctx: ServiceContext<Db>): Promise<BuiltService> {
  const config = loadBillingConfig(ctx.common, ctx.env);
  const iam = iamBackedDeps(ctx, SERVICE_ID);
  const app = createApp({
    db: ctx.db,
    logger: ctx.logger,
    config,
    ...iam,
    readinessChecks: [databaseReadyCheck(ctx.db, SERVICE_ID, migrationsFolder), ...iam.readinessChecks],
    metrics: new ServiceMetrics(SERVICE_ID, { processMetrics: true, databasePool: () => poolStats(ctx.db) }),
  });
  app.ctx.worker.start();
  return { fetch: app.fetch, omitsErrorDetails: app.omitsErrorDetails, close: () => app.ctx.worker.stop() };
}
