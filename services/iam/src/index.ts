import { fileURLToPath } from "node:url";
import { ServiceMetrics, systemClock, workerBacklogSource, type BuiltService, type ServiceContext } from "@core/kit";
import { databaseReadyCheck, poolStats, type Db } from "@core/storage";
import { createApp } from "./app.js";
import { auditDispatcher } from "./audit-stream.js";
import { loadIamConfig } from "./config.js";
import { ensureVaultResource } from "./oauth-provider.js";
import { finishInterruptedSetups, interruptedSetupsBacklog } from "./org-setup-recovery.js";

export const SERVICE_ID = "iam";

/** How often each replica sends the audit events due (billing's worker passes every 5 s by default). */
const AUDIT_WEBHOOK_PASS_MS = 5_000;

/** this service's committed migrations (next to `src/` and `dist/` alike) */
export const migrationsFolder = fileURLToPath(new URL("../drizzle", import.meta.url));

/** Builds IAM from the launcher's context (DESIGN §1). */
export async function buildService(ctx: ServiceContext<Db>): Promise<BuiltService> {
  const config = loadIamConfig(ctx.common, ctx.env);
  const metrics = new ServiceMetrics(SERVICE_ID, { processMetrics: true, databasePool: () => poolStats(ctx.db) });
  await ensureVaultResource(ctx.db, config, systemClock.now());
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
  // audit events to their endpoints (audit-stream.ts): every replica sends, the deliveries' lease keeps two from sending one attempt
  const auditWebhooks = auditDispatcher(ctx.db, app.ctx.clock, ctx.logger, { allowPrivate: config.auditWebhookAllowPrivate });
  metrics.workerJobs("audit_webhooks");
  let sending: Promise<unknown> | null = null;
  const send = setInterval(() => {
    // one pass at a time in this process: a pass still sending to a slow endpoint is not doubled
    if (sending) return;
    sending = metrics
      .timePass("audit_webhooks", () => auditWebhooks.pass())
      .catch((err: unknown) => ctx.logger.warn({ err: (err as Error).message }, "audit webhook deliveries failed; tried again next pass"))
      .finally(() => (sending = null));
  }, AUDIT_WEBHOOK_PASS_MS);
  send.unref();
  return {
    fetch: app.fetch,
    omitsErrorDetails: app.omitsErrorDetails,
    close: async () => {
      clearInterval(sweep);
      clearInterval(send);
      await sending;
    },
  };
}
