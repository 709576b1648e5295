import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isUnreachable } from "@core/kit";
import { openDatabase, openFreshPostgres, rowsOf, type DatabaseHandle } from "@core/storage";

const url = process.env.TEST_DATABASE_URL;

// `poolWaitMs` (CORE_DB_POOL_WAIT_SECONDS): how long a query waits for a pooled connection before it
// fails as unavailable, the failure the services answer with 503 (DESIGN §3, issue 26)
describe.skipIf(!url)("a query waiting for PostgreSQL's pool", () => {
  let fresh: DatabaseHandle & { url: string };
  beforeAll(async () => {
    fresh = await openFreshPostgres(url!);
  });
  afterAll(async () => {
    await fresh?.close();
  });

  /** a pool of one connection, held by a transaction until the returned function is called */
  async function heldPool(poolWaitMs: number) {
    const database = await openDatabase({ url: fresh.url, poolSize: 1, poolWaitMs });
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let inside!: () => void;
    const begun = new Promise<void>((resolve) => (inside = resolve));
    const transaction = database.db.transaction(async (tx) => {
      await tx.execute(sql`select 1`);
      inside();
      await held;
    });
    await begun;
    return { database, release: async () => (release(), await transaction) };
  }

  it("fails as unavailable once its budget is spent, not before", async () => {
    const { database, release } = await heldPool(300);
    try {
      const started = performance.now();
      const err = await database.db.execute(sql`select 2`).then(() => null, (e: unknown) => e);
      expect(isUnreachable(err)).toBe("database");
      expect(performance.now() - started).toBeGreaterThanOrEqual(290);
    } finally {
      await release();
      await database.close();
    }
  });

  it("gets the connection when it is freed within the budget", async () => {
    const { database, release } = await heldPool(60_000);
    try {
      const waiting = database.db.execute(sql`select 2 as n`);
      await new Promise((resolve) => setTimeout(resolve, 500));
      await release();
      expect(rowsOf(await waiting)).toEqual([{ n: 2 }]);
    } finally {
      await database.close();
    }
  });
});
