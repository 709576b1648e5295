import { PGlite } from "@electric-sql/pglite";
import { sql } from "drizzle-orm";
import { drizzle as drizzlePglite } from "drizzle-orm/pglite";
import { drizzle as drizzlePg } from "drizzle-orm/node-postgres";
import type { PgDatabase, PgQueryResultHKT } from "drizzle-orm/pg-core";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import pg from "pg";
import { lockDataDir } from "./data-dir-lock.js";
import { pgliteTemplateArchive, seedDataDir } from "./pglite-template.js";

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Db = PgDatabase<PgQueryResultHKT, any>;

export interface DatabaseHandle {
  db: Db;
  kind: "pglite" | "postgres";
  /** one round trip to the database, for `/health` */
  ping(): Promise<void>;
  close(): Promise<void>;
}

/** The connections of a database at one moment, for `core_db_pool_*` (DESIGN §10). */
export interface PoolStats {
  /** connections it may open: the pool's size */
  max: number;
  /** lent to a query or a transaction */
  busy: number;
  idle: number;
  /** queries and transactions waiting for a connection */
  waiting: number;
}

export function poolStats(db: Db): PoolStats | null {
  const client = (db as unknown as { $client?: unknown }).$client;
  if (client instanceof pg.Pool) {
    return { max: client.options.max ?? 10, busy: client.totalCount - client.idleCount, idle: client.idleCount, waiting: client.waitingCount };
  }
  return null;
}

export interface DatabaseConfig {
  /** PostgreSQL URL (`DATABASE_URL`); wins over `dataDir` */
  url?: string;
  /** directory of the embedded database (`CORE_DATA_DIR`); absent and no url: in memory */
  dataDir?: string;
  /** PostgreSQL pool size per process */
  poolSize?: number;
  /**
   * how long a PostgreSQL query waits for a connection of the pool (a free one, or a new one being
   * made) before it fails as unavailable, which the services answer with a 503; default 5 s
   */
  poolWaitMs?: number;
}

/**
 * Opens the database of DESIGN §2: PostgreSQL when a URL is given, else embedded PGlite persisted
 * in the data directory (holding its lock, since PGlite has none of its own), else PGlite in memory.
 */
export async function openDatabase(config: DatabaseConfig): Promise<DatabaseHandle> {
  if (config.url) return openPostgres(config.url, config.poolSize ?? 10, config.poolWaitMs ?? 5_000);
  if (config.dataDir) {
    mkdirSync(config.dataDir, { recursive: true });
    const release = await lockDataDir(config.dataDir);
    try {
      const pgdata = join(config.dataDir, "pgdata");
      // a new data directory starts as a copy of the installation's template, not an initdb
      await seedDataDir(pgdata);
      return await openPglite(pgdata, release);
    } catch (err) {
      await release();
      throw err;
    }
  }
  return openPglite(undefined, async () => {});
}

async function openPglite(dir: string | undefined, release: () => Promise<void>): Promise<DatabaseHandle> {
  // in memory (the tests): the template's files instead of an initdb, 0.6 s instead of 2.6 s
  const archive = dir ? null : await pgliteTemplateArchive();
  const client = dir ? new PGlite(dir) : archive ? new PGlite({ loadDataDir: archive }) : new PGlite();
  await client.waitReady;
  const db = drizzlePglite({ client }) as unknown as Db;
  let closed = false;
  return {
    db,
    kind: "pglite",
    ping: async () => {
      await client.query("select 1");
    },
    close: async () => {
      if (closed) return;
      closed = true;
      await client.close();
      await release();
    },
  };
}

async function openPostgres(url: string, max: number, waitMs: number): Promise<DatabaseHandle> {
  const pool = new pg.Pool({ connectionString: url, max, idleTimeoutMillis: 30_000, connectionTimeoutMillis: waitMs });
  // A client that loses its server must not crash the process. The pool listens on its idle
  // clients; a lent one (a transaction's) gets no listener from the pool, and node-postgres throws
  // its "error" when the server ends it. Its queries fail anyway and the pool drops it on release.
  pool.on("error", () => {});
  pool.on("connect", (client) => client.on("error", () => {}));
  const db = drizzlePg({ client: pool }) as unknown as Db;
  try {
    await db.execute(sql`select 1`);
  } catch (err) {
    // start-up tries again while the server is down (DESIGN §10): each try leaves no pool behind
    await pool.end().catch(() => {});
    throw err;
  }
  let closed = false;
  return {
    db,
    kind: "postgres",
    ping: async () => {
      await db.execute(sql`select 1`);
    },
    close: async () => {
      if (closed) return;
      closed = true;
      await pool.end();
    },
  };
}
