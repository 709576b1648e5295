import { fileURLToPath } from "node:url";
import { ServiceMetrics, workerBacklogSource, type BuiltService, type ServiceContext } from "@core/kit";
import { databaseReadyCheck, poolStats, type Db } from "@core/storage";
import { createApp } from "./app.js";
import { loadIamConfig } from "./config.js";
import { finishInterruptedSetups, interruptedSetupsBacklog } from "./org-setup-recovery.js";

export const SERVICE_ID = "iam";

/** this service's committed migrations (next to `src/` and `dist/` alike) */
export const migrationsFolder = fileURLToPath(new URL("../drizzle", import.meta.url));

/** Builds IAM from the launcher's context (DESIGN §1). */
export async function buildService(ctx: ServiceContext<Db>): Promise<BuiltService> {
  const config = loadIamConfig(ctx.common, ctx.env);
  const metrics = new ServiceMetrics(SERVICE_ID, { processMetrics: true, databasePool: () => poolStats(ctx.db) });
  const app = createApp({
    db: ctx.db,
    logger: ctx.logger,
    config,
    serviceCredentials: ctx.serviceCredentials,
    healthChecks: [{ name: "database", check: ctx.pingDatabase }],
    readinessChecks: [databaseReadyCheck(ctx.db, SERVICE_ID, migrationsFolder)],
    metrics,
  });
  await app.ctx.serviceTokens.prepare();
  metrics.addGaugeSource(workerBacklogSource("iam_worker", async () => [await interruptedSetupsBacklog(ctx.db, app.ctx.clock.now(), config.orgSetupRecoveryMs)]));
  // set-ups a process left half-way are finished by whichever replica looks first (org-setup-recovery.ts)
  metrics.workerJobs("org_setup_recovery");
  const sweep = setInterval(() => {
    metrics.timePass("org_setup_recovery", () => finishInterruptedSetups(app.ctx, config.orgSetupRecoveryMs)).catch((err: unknown) =>
      ctx.logger.warn({ err: (err as Error).message }, "could not finish interrupted organization set-ups; tried again later"),
    );
  }, Math.max(1_000, config.orgSetupRecoveryMs / 2));
  sweep.unref();
  return {
    fetch: app.fetch,
    omitsErrorDetails: app.omitsErrorDetails,
    close: async () => clearInterval(sweep),
  };
}
