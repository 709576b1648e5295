import { randomBytes } from "node:crypto";
import pg from "pg";
import { openDatabase, type DatabaseHandle } from "./database.js";

/** How long a test's query waits for a pooled PostgreSQL connection: far beyond a loaded machine's delays. */
export const TEST_POOL_WAIT_MS = 60_000;

export interface TestDatabase {
  name: "pglite" | "postgres";
  open(): Promise<DatabaseHandle>;
}

/**
 * The databases every database test runs on (DESIGN §9): PGlite in memory always, and PostgreSQL
 * when `TEST_DATABASE_URL` is set. Under CI a missing `TEST_DATABASE_URL` is an error, so a
 * PostgreSQL suite can never be skipped silently; `TEST_DATABASES=pglite` says it on purpose (CI's
 * second runtime, which checks the runtime, not the database).
 */
export function testDatabases(): TestDatabase[] {
  const url = process.env.TEST_DATABASES === "pglite" ? undefined : process.env.TEST_DATABASE_URL;
  if (!url && process.env.CI && process.env.TEST_DATABASES !== "pglite") {
    throw new Error("CI is set but TEST_DATABASE_URL is not: the PostgreSQL suites would be skipped");
  }
  const list: TestDatabase[] = [{ name: "pglite", open: () => openDatabase({}) }];
  if (url) list.push({ name: "postgres", open: () => openFreshPostgres(url) });
  return list;
}

/** A new, empty database on the server of `url`, dropped again on close; `url` is its own address (for a child process). */
export async function openFreshPostgres(url: string): Promise<DatabaseHandle & { url: string }> {
  const name = `core_test_${randomBytes(6).toString("hex")}`;
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  try {
    await admin.query(`create database ${name}`);
  } finally {
    await admin.end();
  }
  const target = new URL(url);
  target.pathname = `/${name}`;
  // a test's budget for a pooled connection holds on a loaded machine (issue 26): a test asserts
  // what the code does, not how fast a shared machine's database answers
  const handle = await openDatabase({ url: target.toString(), poolSize: 5, poolWaitMs: TEST_POOL_WAIT_MS });
  return {
    ...handle,
    url: target.toString(),
    close: async () => {
      await handle.close();
      const dropper = new pg.Client({ connectionString: url });
      await dropper.connect();
      try {
        await dropper.query(`drop database if exists ${name} with (force)`);
      } finally {
        await dropper.end();
      }
    },
  };
}
