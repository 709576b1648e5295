import {
  ConfigError,
  SERVICES,
  createLogger,
  listen,
  loadCommonConfig,
  onShutdown,
  persistentSecret,
  startTracing,
  type BuiltService,
  type CommonConfig,
  type Logger,
  type RunningServer,
  type ServiceContext,
  type ServiceName,
  type Tracing,
} from "@core/kit";
import { applyMigrations, DataDirLockedError, type DatabaseHandle, type Db } from "@core/storage";
import { parseServiceCredentials } from "@core/service-auth";
import { databaseLost, DatabaseUnavailableError, openDatabaseWhenUp } from "./database-wait.js";

/** What every service package exports for the launcher. */
export interface ServiceModule {
  SERVICE_ID: string;
  /** undefined for a service without tables (the vault) */
  migrationsFolder: string | undefined;
  buildService(ctx: ServiceContext<Db>): Promise<BuiltService>;
}

/**
 * Services whose code is loaded only once the database has begun to open: opening PGlite is mostly
 * waiting (WebAssembly compiles on other threads, files are read), and evaluating the services'
 * code is mostly work on this one, so the two overlap (ADR 0016).
 */
export interface LazyServices {
  /** whether any of them has tables, so the database is opened before their code is loaded */
  withTables: boolean;
  load(): Promise<[ServiceName, ServiceModule][]>;
}

export interface RunOptions {
  services: [ServiceName, ServiceModule][] | LazyServices;
  /** apply migrations and exit (`npm run migrate`) */
  migrateOnly?: boolean;
  /** generate the built-in service credentials in the data dir (one-process and embedded modes) */
  builtInCredentials: boolean;
  env?: NodeJS.ProcessEnv;
  /** where start-up says what it waits for (the database); default: stderr */
  say?: (line: string) => void;
}

export interface Running {
  /** each service's public address (`CORE_<NAME>_URL`, else its port on localhost) */
  urls: Record<string, string>;
  /** where each service listens, as bound (a replica's own port, even behind a shared address) */
  listening: Record<string, string>;
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
  const began = performance.now();
  const phases: Record<string, number> = {};
  const since = (at: number) => Math.round(performance.now() - at);
  // a service without tables (the vault) needs no database: it starts while the database opens, and
  // run alone it never opens one, nor takes the data directory's lock
  const given = options.services;
  const eager = Array.isArray(given) ? given : null;
  const lazy = Array.isArray(given) ? null : given;
  const needsDatabase = eager ? eager.some(([, module]) => module.migrationsFolder !== undefined) : lazy!.withTables;
  const say = options.say ?? ((line: string) => process.stderr.write(`${line}\n`));
  const opening = needsDatabase
    ? openDatabaseWhenUp(
        { url: common.databaseUrl, dataDir: common.databaseUrl ? undefined : common.dataDir, poolWaitMs: common.databasePoolWaitSeconds * 1000 },
        { seconds: common.databaseWaitSeconds, say },
      )
    : null;
  // awaited below; until then a failure must not count as unhandled
  opening?.catch(() => {});
  let services: [ServiceName, ServiceModule][];
  try {
    const at = performance.now();
    services = eager ?? (await lazy!.load());
    if (lazy) phases.load = since(at);
  } catch (err) {
    await opening?.then((open) => open.close(), () => {});
    throw err;
  }
  const withTables = services.filter(([, module]) => module.migrationsFolder !== undefined);
  const withoutTables = services.filter(([, module]) => module.migrationsFolder === undefined);
  if (withTables.length > 0 && !opening) throw new Error(`${withTables.map(([name]) => name).join(", ")} have tables, but were announced without (LazyServices.withTables)`);
  let database: OpenDatabase = withoutDatabase();
  const servers: { name: ServiceName; server: RunningServer }[] = [];
  const built: BuiltService[] = [];
  const urls: Record<string, string> = {};
  const listening: Record<string, string> = {};
  const tracings: Tracing[] = [];
  const stop = async () => {
    for (const { server } of servers) await server.close();
    for (const service of built) await service.close();
    // the spans still buffered go out before the process ends
    for (const tracing of tracings) await tracing.shutdown();
    await database.close();
  };
  // applying migrations needs no credentials, and `--migrate-only` writes none into the data directory
  const credentials = options.migrateOnly ? new Map<string, string>() : serviceCredentials(common, env, options.builtInCredentials);
  const start = async ([name, module]: [ServiceName, ServiceModule], open: OpenDatabase) => {
    const at = performance.now();
    // before the service's app is made, which takes its tracing from there (OTLP export when configured)
    tracings.push(await startTracing(name, env));
    const service = await module.buildService({
      name,
      common,
      db: open.db,
      pingDatabase: open.ping,
      logger: createLogger(name),
      serviceCredentials: credentials,
      env,
    });
    built.push(service);
    const server = await listen(service, common.port(name), common.host);
    servers.push({ name, server });
    const path = name === "vault" ? "/mcp" : "";
    urls[name] = common.url(name) + path;
    listening[name] = server.url + path;
    phases[name] = since(at);
  };
  const early = (async () => {
    if (options.migrateOnly) return;
    for (const entry of withoutTables) await start(entry, withoutDatabase());
  })().then(
    () => null,
    (err: unknown) => err,
  );
  try {
    if (opening) {
      database = await opening;
      phases.database = since(began);
      const at = performance.now();
      for (const [name, module] of withTables) {
        const applied = await applyMigrations(database.db, name, module.migrationsFolder!).catch((err: unknown) => {
          throw databaseLost(err, common.databaseUrl, `while ${name}'s migrations were applied`) ?? err;
        });
        // the launcher logs as service "core"; the service migrated is its own key, so a line has one `service`
        if (applied > 0) logger.info({ migrated: name, applied }, "migrations applied");
      }
      phases.migrations = since(at);
    }
    const failed = await early;
    if (failed) throw failed;
    if (options.migrateOnly) return { urls: {}, listening: {}, stop };
    for (const entry of withTables) await start(entry, database);
    const answering = performance.now();
    await untilAnswering(servers);
    phases.firstAnswers = since(answering);
    // where start-up time goes: the services without tables start while the database opens
    logger.info({ ms: since(began), sinceProcessStart: Math.round(process.uptime() * 1000), phases, rssMiB: Math.round(process.memoryUsage().rss / 2 ** 20) }, "started");
    // in the order services were asked for
    const inOrder = (of: Record<string, string>) => Object.fromEntries(services.map(([name]) => [name, of[name]!]));
    return { urls: inOrder(urls), listening: inOrder(listening), stop };
  } catch (err) {
    await early;
    await stop();
    throw err;
  }
}

/**
 * Runs services until SIGTERM/SIGINT. A start-up failure someone can mend (configuration, a port in
 * use, the database, a file) is one line on stderr and exit code 1, never a stack trace (DESIGN §10).
 */
export async function runUntilStopped(options: RunOptions, givenLogger?: Logger): Promise<Running | undefined> {
  try {
    const logger = givenLogger ?? createLogger("core");
    const running = await runServices(options, logger);
    onShutdown(logger, [running.stop]);
    return running;
  } catch (err) {
    const sentence = startFailure(err, options.env ?? process.env);
    if (sentence === null) throw err;
    console.error(`core: ${sentence}`);
    process.exit(1);
  }
}

/** The one sentence for a start-up failure someone can mend, or null for a fault of ours (its stack is wanted). */
export function startFailure(err: unknown, env: NodeJS.ProcessEnv): string | null {
  if (!(err instanceof Error)) return null;
  // each service bundle carries its own copy of the kit, so its ConfigError is known by name
  if (err.name === ConfigError.name || err instanceof DataDirLockedError || err instanceof DatabaseUnavailableError) return err.message;
  const code = (err as NodeJS.ErrnoException).code;
  if (code === "EADDRINUSE") return `${err.message}. Another process uses that port; set CORE_<NAME>_PORT or CORE_BASE_PORT to move it.`;
  if (code === "EACCES" && (err as NodeJS.ErrnoException).syscall === "listen") return `${err.message}. Ports below 1024 need privileges; set CORE_<NAME>_PORT or CORE_BASE_PORT to another.`;
  const host = env.CORE_HOST || "127.0.0.1";
  if (code === "EADDRNOTAVAIL" || (code === "ENOTFOUND" && (err as { hostname?: string }).hostname === host)) return `${err.message}. Check CORE_HOST: it must be an address of this machine.`;
  // the data directory or a file it names: not writable, not there, a disk full
  if ((err as NodeJS.ErrnoException).syscall && (err as NodeJS.ErrnoException).path) return `${err.message}. Check CORE_DATA_DIR and the paths the configuration names.`;
  return null;
}

/** Entry of `node services/<name>/dist/main.js`: one service from the environment. */
export async function runSingleService(name: ServiceName, module: ServiceModule): Promise<void> {
  const running = await runUntilStopped({ services: [[name, module]], builtInCredentials: !process.env.DATABASE_URL });
  if (running) console.log(`core ${name} listening on ${running.urls[name]}`);
}

/** How long start-up waits for a bound service to answer its first request. */
const FIRST_ANSWER_MS = 30_000;

/**
 * Bound is not yet serving: a service's first request pays for what it set up lazily (IAM its
 * signing keys, the resource services their client of IAM), which on a loaded machine took seconds
 * after the banner said "running" (issue 26). So each service answers one `GET /health` (any
 * status: a dependency elsewhere may be down) before start-up says it runs (DESIGN §10).
 */
async function untilAnswering(servers: { name: ServiceName; server: RunningServer }[]): Promise<void> {
  const deadline = Date.now() + FIRST_ANSWER_MS;
  await Promise.all(
    servers.map(async ({ name, server }) => {
      for (;;) {
        try {
          const response = await fetch(`${server.url}/health`, { signal: AbortSignal.timeout(Math.max(1, deadline - Date.now())) });
          await response.body?.cancel();
          return;
        } catch (err) {
          if (Date.now() >= deadline) throw new Error(`${name} listens on ${server.url} but did not answer within ${FIRST_ANSWER_MS / 1000} s: ${(err as Error).message}`);
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
      }
    }),
  );
}
