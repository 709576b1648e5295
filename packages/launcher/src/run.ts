import {
  ConfigError,
  SERVICES,
  createLogger,
  listen,
  loadCommonConfig,
  onShutdown,
  persistentSecret,
  type BuiltService,
  type CommonConfig,
  type Logger,
  type RunningServer,
  type ServiceContext,
  type ServiceName,
} from "@core/kit";
import { applyMigrations, DataDirLockedError, openDatabase, type DatabaseHandle, type Db } from "@core/storage";
import { parseServiceCredentials } from "@core/service-auth";

/** What every service package exports for the launcher. */
export interface ServiceModule {
  SERVICE_ID: string;
  /** undefined for a service without tables (the vault) */
  migrationsFolder: string | undefined;
  buildService(ctx: ServiceContext<Db>): Promise<BuiltService>;
}

export interface RunOptions {
  services: [ServiceName, ServiceModule][];
  /** apply migrations and exit (`npm run migrate`) */
  migrateOnly?: boolean;
  /** generate the built-in service credentials in the data dir (one-process and embedded modes) */
  builtInCredentials: boolean;
  env?: NodeJS.ProcessEnv;
}

export interface Running {
  urls: Record<string, string>;
  stop(): Promise<void>;
}

/** The credentials services use between each other: built-ins from the data dir plus the environment's. */
function serviceCredentials(common: CommonConfig, env: NodeJS.ProcessEnv, builtIn: boolean): Map<string, string> {
  const map = new Map<string, string>();
  if (builtIn) for (const name of Object.keys(SERVICES)) map.set(name, persistentSecret(common.dataDir, `service-${name}`));
  for (const [id, secret] of parseServiceCredentials(env.CORE_SERVICE_CREDENTIALS)) map.set(id, secret);
  return map;
}

type OpenDatabase = Pick<DatabaseHandle, "db" | "ping" | "close">;

/** The database stand-in for services without tables: any use of it is a programming error. */
function withoutDatabase(): OpenDatabase {
  const refuse = (): never => {
    throw new Error("No database is open: only services with migrations get one (ServiceModule.migrationsFolder)");
  };
  return { db: new Proxy({}, { get: refuse }) as Db, ping: async () => {}, close: async () => {} };
}

/**
 * Opens the database, applies each service's migrations and starts each service on its own port
 * (DESIGN §1). Services talk to each other over HTTP even in one process.
 */
export async function runServices(options: RunOptions, logger: Logger): Promise<Running> {
  const env = options.env ?? process.env;
  const common = loadCommonConfig(env);
  // a service without tables (the vault) run alone needs no database, nor the data directory's lock
  const needsDatabase = options.services.some(([, module]) => module.migrationsFolder !== undefined);
  const database: OpenDatabase = needsDatabase
    ? await openDatabase({ url: common.databaseUrl, dataDir: common.databaseUrl ? undefined : common.dataDir })
    : withoutDatabase();
  const servers: RunningServer[] = [];
  const built: BuiltService[] = [];
  const stop = async () => {
    for (const server of servers) await server.close();
    for (const service of built) await service.close();
    await database.close();
  };
  try {
    for (const [name, module] of options.services) {
      if (!module.migrationsFolder) continue;
      const applied = await applyMigrations(database.db, name, module.migrationsFolder);
      // the launcher logs as service "core"; the service migrated is its own key, so a line has one `service`
      if (applied > 0) logger.info({ migrated: name, applied }, "migrations applied");
    }
    if (options.migrateOnly) return { urls: {}, stop };
    // only now: applying migrations needs no credentials, and writes none into the data directory
    const credentials = serviceCredentials(common, env, options.builtInCredentials);
    const urls: Record<string, string> = {};
    for (const [name, module] of options.services) {
      const service = await module.buildService({
        name,
        common,
        db: database.db,
        pingDatabase: database.ping,
        logger: createLogger(name),
        serviceCredentials: credentials,
        env,
      });
      built.push(service);
      servers.push(await listen(service, common.port(name), common.host));
      urls[name] = name === "vault" ? `${common.url(name)}/mcp` : common.url(name);
    }
    return { urls, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** Runs services until SIGTERM/SIGINT, explaining configuration problems instead of crashing. */
export async function runUntilStopped(options: RunOptions, givenLogger?: Logger): Promise<Running | undefined> {
  try {
    const logger = givenLogger ?? createLogger("core");
    const running = await runServices(options, logger);
    onShutdown(logger, [running.stop]);
    return running;
  } catch (err) {
    // each service bundle carries its own copy of the kit, so its ConfigError is known by name
    if ((err instanceof Error && err.name === ConfigError.name) || err instanceof DataDirLockedError) {
      console.error(`core: ${err.message}`);
      process.exit(1);
    }
    if ((err as NodeJS.ErrnoException).code === "EADDRINUSE") {
      console.error(`core: ${(err as Error).message}. Another process uses that port; set CORE_<NAME>_PORT to move it.`);
      process.exit(1);
    }
    throw err;
  }
}

/** Entry of `node services/<name>/dist/main.js`: one service from the environment. */
export async function runSingleService(name: ServiceName, module: ServiceModule): Promise<void> {
  const running = await runUntilStopped({ services: [[name, module]], builtInCredentials: !process.env.DATABASE_URL });
  if (running) console.log(`core ${name} listening on ${running.urls[name]}`);
}
