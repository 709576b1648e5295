import { createServiceApp, isUnder, systemClock, type Clock, type HealthCheck, type Logger, type ServiceMetrics } from "@core/kit";
import { guardCaller, type CredentialResolvers } from "@core/service-auth";
import type { Db } from "@core/storage";
import { platformRoutes } from "./routes/platforms.js";
import { stackRoutes } from "./routes/stacks.js";

export interface RegistryDeps {
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

export type RegistryContext = RegistryDeps & { clock: Clock };

/** The platform registry's HTTP app (spec §2.10, §4.6, DESIGN §7). */
export function createApp(deps: RegistryDeps) {
  const resolved: RegistryContext = { ...deps, clock: deps.clock ?? systemClock };
  const app = createServiceApp({
    service: "platform-registry",
    title: "Core platform registry",
    description: "Platforms and their workspace stacks.",
    logger: deps.logger,
    healthChecks: deps.healthChecks ?? [],
    readinessChecks: deps.readinessChecks ?? [],
    metrics: deps.metrics,
    // who is calling is settled before any input is validated: no credential is 401, never 400
    guard: (c) => (isUnder(c.req.path, "/platforms") ? guardCaller(c, deps.credentials) : undefined),
  });
  platformRoutes(app, resolved);
  stackRoutes(app, resolved);
  return app;
}
