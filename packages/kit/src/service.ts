import type { CommonConfig, ServiceName } from "./config.js";
import type { Logger } from "./logger.js";

/** What the launcher hands each service: shared config, its database and its logger. */
export interface ServiceContext<Db = unknown> {
  name: ServiceName;
  common: CommonConfig;
  db: Db;
  pingDatabase(): Promise<void>;
  logger: Logger;
  /** service id → secret, for service-to-service authentication (DESIGN §4) */
  serviceCredentials: Map<string, string>;
  env: NodeJS.ProcessEnv;
}

/** A service built and ready to listen. */
export interface BuiltService {
  fetch: (request: Request) => Response | Promise<Response>;
  /** the paths whose error envelopes carry no `details` (spec §2.3), for answers made before any route runs */
  omitsErrorDetails?: (path: string) => boolean;
  /** releases what the service holds (timers, connections), not the shared database */
  close(): Promise<void>;
}

/** Checks that a service answers, with a short timeout; for `/health` of dependants. */
export async function probe(url: string, timeoutMs = 2_000): Promise<void> {
  const response = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
  if (!response.ok) throw new Error(`${url} answered ${response.status}`);
  await response.body?.cancel();
}
