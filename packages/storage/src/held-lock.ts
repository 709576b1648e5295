import pg from "pg";
import type { Db } from "./database.js";
import { poolStats } from "./database.js";

/** The work holding, or waiting for, each key in this process: a chain, in arrival order. */
const chains = new Map<string, Promise<unknown>>();
/** Keys held at once on PostgreSQL, and the work waiting for one to be given back. */
let held = 0;
const queue: (() => void)[] = [];

/**
 * Runs `work` while holding `key`: one holder at a time in this process and, on PostgreSQL, across
 * every replica (an advisory lock held by a transaction of its own, open while `work` runs). It is
 * held while `work` writes through other connections, such as the auth library's own, which no
 * transaction of ours can span. The lock takes a connection of the pool for as long as it is held, so at most half
 * the pool holds locks at once and the rest waits in this process: holders always leave
 * connections for their work. PGlite has one process (its data directory's lock): the chain
 * alone orders the holders there.
 */
export function withHeldLock<T>(db: Db, key: string, work: () => Promise<T>): Promise<T> {
  const before = chains.get(key) ?? Promise.resolve();
  const run = before.then(() => holdAcrossReplicas(db, key, work));
  const done = run.catch(() => undefined);
  chains.set(key, done);
  void done.then(() => {
    if (chains.get(key) === done) chains.delete(key);
  });
  return run;
}

async function holdAcrossReplicas<T>(db: Db, key: string, work: () => Promise<T>): Promise<T> {
  const pool = (db as unknown as { $client?: unknown }).$client;
  if (!(pool instanceof pg.Pool)) return work();
  const most = Math.max(1, Math.floor((poolStats(db)?.max ?? 2) / 2));
  if (held >= most) await new Promise<void>((resume) => queue.push(resume));
  else held++;
  try {
    const client = await pool.connect();
    try {
      // a transaction's lock, held by an open transaction on this connection: it ends with the
      // transaction (or the connection), and needs no session state, which pgbouncer in
      // transaction mode would not carry
      await client.query("begin");
      await client.query("select pg_advisory_xact_lock(hashtextextended($1, 0))", [key]);
    } catch (err) {
      client.release(err as Error);
      throw err;
    }
    let lost: Error | undefined;
    try {
      return await work();
    } finally {
      // a connection that cannot end its transaction is closed, which ends it and gives the lock back
      await client.query("commit").catch((err: Error) => (lost = err));
      client.release(lost);
    }
  } finally {
    const next = queue.shift();
    if (next) next();
    else held--;
  }
}
