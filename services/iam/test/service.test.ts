import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadCommonConfig, silentLogger, type BuiltService } from "@core/kit";
import { applyMigrations, rowsOf, testDatabases, type DatabaseHandle } from "@core/storage";
import { buildService, migrationsFolder, SERVICE_ID } from "../src/index.js";
import { TEST_SECRET } from "./support/harness.js";

// IAM as the launcher builds it (src/index.ts)
describe.each(testDatabases())("IAM as the launcher builds it on $name", ({ open }) => {
  let database: DatabaseHandle;
  let built: BuiltService | undefined;
  beforeAll(async () => {
    database = await open();
    await applyMigrations(database.db, SERVICE_ID, migrationsFolder);
  });
  afterAll(async () => {
    await built?.close();
    await database?.close();
  });

  it("has its signing key before the first request: the key set other services fetch at start-up is never empty", async () => {
    const keys = async () => rowsOf<{ n: number }>(await database.db.execute(sql`select count(*)::int as n from iam.jwks`))[0]!.n;
    expect(await keys()).toBe(0);
    built = await buildService({
      name: SERVICE_ID,
      common: loadCommonConfig({}),
      db: database.db,
      pingDatabase: database.ping,
      logger: silentLogger(),
      serviceCredentials: new Map(),
      env: { CORE_AUTH_SECRET: TEST_SECRET },
    });
    expect(await keys()).toBe(1);
    const published = (await (await built.fetch(new Request("http://localhost/api/auth/jwks"))).json()) as { keys: unknown[] };
    expect(published.keys).toHaveLength(1);
  });
});
