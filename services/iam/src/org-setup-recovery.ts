import { and, asc, count, eq, isNull, lt, min } from "drizzle-orm";
import type { Clock, JobBacklog, Logger } from "@core/kit";
import type { Db } from "@core/storage";
import type { AuditLog } from "./audit.js";
import { organization, orgSetups } from "./db/schema.js";
import type { RegistryClient } from "./registry-client.js";
import { linkPlatform } from "./routes/org-setup.js";

/**
 * Finishes organization set-ups that a process left between its two steps (killed, or the
 * registry's answer lost): a set-up older than `staleAfterMs` (longer than any set-up request can
 * run) gets the platform the registry made for its slug, or, if the registry made none, is rolled
 * back, so a retry of the set-up works. Every IAM replica runs this; each step is idempotent, so two
 * replicas finishing one set-up end alike. Answers how many set-ups it finished.
 */
export async function finishInterruptedSetups(deps: { db: Db; clock: Clock; registry: RegistryClient; audit: AuditLog; logger: Logger }, staleAfterMs: number): Promise<number> {
  const { db, clock, registry, audit, logger } = deps;
  const stale = await db
    .select({ orgId: orgSetups.orgId, slug: organization.slug })
    .from(orgSetups)
    .innerJoin(organization, eq(organization.id, orgSetups.orgId))
    .where(lt(orgSetups.startedAt, new Date(clock.now().getTime() - staleAfterMs)))
    .orderBy(asc(orgSetups.startedAt))
    .limit(20);
  let finished = 0;
  for (const { orgId, slug } of stale) {
    // the registry unreachable: the next pass tries again
    const platform = await registry.findPlatformBySlug(slug);
    if (platform) {
      await linkPlatform(db, orgId, platform.id);
    } else {
      await db.delete(organization).where(and(eq(organization.id, orgId), isNull(organization.platformId)));
    }
    await audit.record({
      action: "organization.setup",
      outcome: platform ? "success" : "failure",
      actorType: "system",
      orgId: platform ? orgId : null,
      targetType: "organization",
      targetId: orgId,
      metadata: { slug, recovered: true, ...(platform ? { platformId: platform.id } : { rolledBack: true }) },
    });
    logger.warn({ orgId, slug, outcome: platform ? "linked its platform" : "rolled back" }, "finished an interrupted organization set-up");
    finished++;
  }
  return finished;
}

/** The sweep's backlog (`core_worker_*{job="org_setup_recovery"}`): set-ups it would finish now, and how long the oldest has waited since it became stale. */
export async function interruptedSetupsBacklog(db: Db, now: Date, staleAfterMs: number): Promise<JobBacklog> {
  const staleBefore = new Date(now.getTime() - staleAfterMs);
  const [row] = await db.select({ due: count(), oldest: min(orgSetups.startedAt) }).from(orgSetups).where(lt(orgSetups.startedAt, staleBefore));
  const oldest = row?.oldest ? new Date(row.oldest) : null;
  return { job: "org_setup_recovery", due: Number(row?.due ?? 0), oldestDueSeconds: oldest ? (staleBefore.getTime() - oldest.getTime()) / 1000 : 0 };
}
