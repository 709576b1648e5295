import { fileURLToPath } from "node:url";
import { probe, type BuiltService, type ServiceContext } from "@core/kit";
import { remoteResolvers, ServiceTokenClient } from "@core/service-auth";
import type { Db } from "@core/storage";
import { createApp } from "./app.js";

export const SERVICE_ID = "stack-registry";

/** this service's committed migrations (next to `src/` and `dist/` alike) */
export const migrationsFolder = fileURLToPath(new URL("../drizzle", import.meta.url));

/** Builds the stack registry from the launcher's context (DESIGN §1). */
export async function buildService(ctx: ServiceContext<Db>): Promise<BuiltService> {
  const iamUrl = ctx.common.url("iam");
  const secret = ctx.serviceCredentials.get(SERVICE_ID);
  if (!secret) throw new Error(`No service credential for ${SERVICE_ID}: add it to CORE_SERVICE_CREDENTIALS`);
  const tokens = new ServiceTokenClient(iamUrl, { serviceId: SERVICE_ID, secret });
  const app = createApp({
    db: ctx.db,
    logger: ctx.logger,
    credentials: remoteResolvers({ iamUrl, serviceId: SERVICE_ID, tokens }),
    healthChecks: [
      { name: "database", check: ctx.pingDatabase },
      { name: "iam", check: () => probe(`${iamUrl}/api/auth/jwks`) },
    ],
  });
  return { fetch: app.fetch, close: async () => {} };
}
