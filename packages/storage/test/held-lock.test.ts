import { sql } from "drizzle-orm";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openDatabase, rowsOf, testDatabases, withHeldLock, type DatabaseHandle } from "@core/storage";

const url = process.env.TEST_DATABASE_URL;

/** A step of work that the test lets go on when it says so. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { open, opened };
}

describe.each(testDatabases())("a held lock on $name", ({ open }) => {
  let database: DatabaseHandle;
  beforeAll(async () => {
    database = await open();
  });
  afterAll(async () => {
    await database?.close();
  });

  it("lets one holder of a key work at a time, in arrival order, and holders of other keys meanwhile", async () => {
    const events: string[] = [];
    const first = gate();
    const a = withHeldLock(database.db, "test:one", async () => {
      events.push("a in");
      await first.opened;
      events.push("a out");
    });
    const b = withHeldLock(database.db, "test:one", async () => void events.push("b in"));
    const other = withHeldLock(database.db, "test:other", async () => void events.push("other in"));
    await other;
    expect(events).toEqual(["a in", "other in"]);
    first.open();
    await Promise.all([a, b]);
    expect(events).toEqual(["a in", "other in", "a out", "b in"]);
  });

  it("gives the key back when the work fails, and the failure to its caller", async () => {
    const failed = withHeldLock(database.db, "test:fails", async () => {
      throw new Error("the work failed");
    });
    const next = withHeldLock(database.db, "test:fails", async () => "next ran");
    await expect(failed).rejects.toThrow("the work failed");
    expect(await next).toBe("next ran");
  });
});

describe.skipIf(!url)("a held lock across replicas (PostgreSQL)", () => {
  let database: DatabaseHandle;
  let replica: pg.Client;
  beforeAll(async () => {
    database = await openDatabase({ url, poolSize: 2 });
    replica = new pg.Client({ connectionString: url });
    await replica.connect();
  });
  afterAll(async () => {
    await replica?.end();
    await database?.close();
  });

  it("waits while another replica holds the key, and runs once it lets go", async () => {
    await replica.query("select pg_advisory_lock(hashtextextended($1, 0))", ["test:replicas"]);
    let ran = false;
    const waiting = withHeldLock(database.db, "test:replicas", async () => {
      ran = true;
    });
    // the other replica's lock is seen by PostgreSQL: nothing runs while it holds it
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(ran).toBe(false);
    await replica.query("select pg_advisory_unlock(hashtextextended($1, 0))", ["test:replicas"]);
    await waiting;
    expect(ran).toBe(true);
  });

  it("leaves the pool a connection for the work of every holder, however many keys are held at once", async () => {
    // a pool of two: one holds a key while the work writes through the other
    const results = await Promise.all(["k1", "k2", "k3"].map((key) => withHeldLock(database.db, `test:pool:${key}`, async () => rowsOf(await database.db.execute(sql`select 1 as n`)).length)));
    expect(results).toEqual([1, 1, 1]);
  });
});
