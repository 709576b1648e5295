import { fileURLToPath } from "node:url";
import type { BuiltService, ServiceContext } from "@core/kit";
import { iamBackedDeps } from "@core/service-auth";
import type { Db } from "@core/storage";
import { createApp } from "./app.js";

export const SERVICE_ID = "stack-registry";

/** this service's committed migrations (next to `src/` and `dist/` alike) */
export const migrationsFolder = fileURLToPath(new URL("../drizzle", import.meta.url));

/** Builds the stack registry from the launcher's context (DESIGN §1). */
export async function buildService(ctx: ServiceContext<Db>): Promise<BuiltService> {
  const app = createApp({ db: ctx.db, logger: ctx.logger, ...iamBackedDeps(ctx, SERVICE_ID) });
  return { fetch: app.fetch, close: async () => {} };
}
