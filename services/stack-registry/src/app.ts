import { createServiceApp, isUnder, systemClock, type Clock, type HealthCheck, type Logger, type ServiceMetrics } from "@core/kit";
import { guardCaller, type CredentialResolvers } from "@core/service-auth";
import type { Db } from "@core/storage";
import { authorizePublisher } from "./access.js";
import { templateRoutes } from "./routes/templates.js";
import { versionRoutes } from "./routes/versions.js";

export interface StackRegistryDeps {
  db: Db;
  credentials: CredentialResolvers;
  logger: Logger;
  clock?: Clock;
  /** what `/health` checks: the database, IAM */
  healthChecks?: HealthCheck[];
  /** what `/health/ready` checks: the database and its migrations, IAM's keys */
  readinessChecks?: HealthCheck[];
  metrics?: ServiceMetrics;
}

export type StackRegistryContext = StackRegistryDeps & { clock: Clock };

const READS = new Set(["GET", "HEAD", "OPTIONS"]);

/** The stack registry's HTTP app (spec §2.8-2.9, §4.5, DESIGN §7). */
export function createApp(deps: StackRegistryDeps) {
  const resolved: StackRegistryContext = { ...deps, clock: deps.clock ?? systemClock };
  const app = createServiceApp({
    service: "stack-registry",
    title: "Core stack registry",
    description: "The catalogue of stack templates and their published, immutable versions.",
    logger: deps.logger,
    healthChecks: deps.healthChecks ?? [],
    readinessChecks: deps.readinessChecks ?? [],
    metrics: deps.metrics,
    // who is calling, and whether they may write, is settled before any input is validated:
    // no credential is 401 and a tenant member's write is 403, never 400
    guard: (c) => {
      if (!isUnder(c.req.path, "/api/v1/stacks")) return undefined;
      return READS.has(c.req.method) ? guardCaller(c, deps.credentials) : authorizePublisher(c, deps.credentials);
    },
  });
  templateRoutes(app, resolved);
  versionRoutes(app, resolved);
  return app;
}
