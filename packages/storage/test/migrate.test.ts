import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sql } from "drizzle-orm";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { applyMigrations, openDatabase, rowsOf, testDatabases, type DatabaseHandle, type Db } from "@core/storage";
import { migrationsFolder as registryMigrations } from "../../../services/platform-registry/src/index.js";

const scratch = mkdtempSync(join(tmpdir(), "core-migrations-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** A drizzle-kit style migrations folder holding these migrations, in order. */
function migrationsFolder(migrations: string[]): string {
  const folder = join(scratch, randomBytes(4).toString("hex"));
  mkdirSync(join(folder, "meta"), { recursive: true });
  const entries = migrations.map((text, idx) => {
    const tag = `${String(idx).padStart(4, "0")}_step`;
    writeFileSync(join(folder, `${tag}.sql`), text);
    return { idx, version: "7", when: 1_700_000_000_000 + idx, tag, breakpoints: true };
  });
  writeFileSync(join(folder, "meta", "_journal.json"), JSON.stringify({ version: "7", dialect: "postgresql", entries }));
  return folder;
}

const uniqueName = (prefix: string) => `${prefix}_${randomBytes(4).toString("hex")}`;

async function appliedHashes(db: Db, service: string): Promise<string[]> {
  return rowsOf<{ hash: string }>(await db.execute(sql`select hash from public.core_migrations where service = ${service}`)).map((r) => r.hash);
}

async function count(db: Db, table: string): Promise<number> {
  const [row] = rowsOf<{ n: number }>(await db.execute(sql.raw(`select count(*)::int as n from ${table}`)));
  return row!.n;
}

async function tableExists(db: Db, qualified: string): Promise<boolean> {
  const [row] = rowsOf<{ t: string | null }>(await db.execute(sql`select to_regclass(${qualified})::text as t`));
  return row!.t !== null;
}

describe.each(testDatabases())("applyMigrations on $name", ({ open }) => {
  let handle: DatabaseHandle;
  let db: Db;
  beforeAll(async () => {
    handle = await open();
    db = handle.db;
  });
  afterAll(async () => {
    await handle?.close();
  });

  it("applies the platform registry's committed migrations once, then finds nothing left to do", async () => {
    expect(await applyMigrations(db, "platform-registry", registryMigrations)).toBe(1);
    expect(await tableExists(db, "registry.platforms")).toBe(true);
    expect(await tableExists(db, "registry.stacks")).toBe(true);
    const before = await appliedHashes(db, "platform-registry");
    expect(before).toHaveLength(1);
    expect(await applyMigrations(db, "platform-registry", registryMigrations)).toBe(0);
    expect(await appliedHashes(db, "platform-registry")).toEqual(before);
  });

  it("applies only the migrations added since the last run", async () => {
    const service = uniqueName("svc");
    const schema = uniqueName("s");
    const first = `create schema ${schema};\n--> statement-breakpoint\ncreate table ${schema}.a (id int primary key);`;
    const second = `create table ${schema}.b (id int primary key);\n--> statement-breakpoint\ninsert into ${schema}.a values (1);`;
    expect(await applyMigrations(db, service, migrationsFolder([first]))).toBe(1);
    const grown = migrationsFolder([first, second]);
    expect(await applyMigrations(db, service, grown)).toBe(1);
    expect(await applyMigrations(db, service, grown)).toBe(0);
    expect(await tableExists(db, `${schema}.b`)).toBe(true);
    expect(await count(db, `${schema}.a`)).toBe(1);
    expect(await appliedHashes(db, service)).toHaveLength(2);
  });

  it("keeps each service's record apart: the same folder applies once per service", async () => {
    const schema = uniqueName("s");
    const folder = migrationsFolder([`create schema if not exists ${schema};\n--> statement-breakpoint\ncreate table if not exists ${schema}.t (id int);`]);
    const [one, two] = [uniqueName("svc"), uniqueName("svc")];
    expect(await applyMigrations(db, one, folder)).toBe(1);
    expect(await applyMigrations(db, two, folder)).toBe(1);
    expect(await applyMigrations(db, one, folder)).toBe(0);
  });

  it("rolls back the whole run when a migration fails, recording nothing", async () => {
    const service = uniqueName("svc");
    const schema = uniqueName("s");
    const folder = migrationsFolder([
      `create schema ${schema};\n--> statement-breakpoint\ncreate table ${schema}.ok (id int);`,
      `create table ${schema}.half (id int);\n--> statement-breakpoint\ninsert into ${schema}.missing values (1);`,
    ]);
    await expect(applyMigrations(db, service, folder)).rejects.toThrow();
    expect(await tableExists(db, `${schema}.ok`)).toBe(false);
    expect(await tableExists(db, `${schema}.half`)).toBe(false);
    expect(await appliedHashes(db, service)).toEqual([]);
  });

  it("lets two concurrent runs on one handle apply each migration exactly once", async () => {
    const service = uniqueName("svc");
    const schema = uniqueName("s");
    const folder = migrationsFolder([
      `create schema ${schema};\n--> statement-breakpoint\ncreate table ${schema}.runs (n int);\n--> statement-breakpoint\ninsert into ${schema}.runs values (1);`,
      `insert into ${schema}.runs values (2);`,
    ]);
    const results = await Promise.all([applyMigrations(db, service, folder), applyMigrations(db, service, folder)]);
    expect(results.sort()).toEqual([0, 2]);
    expect(await count(db, `${schema}.runs`)).toBe(2);
    expect(await appliedHashes(db, service)).toHaveLength(2);
  });
});

const postgresUrl = process.env.TEST_DATABASE_URL;

describe.runIf(postgresUrl)("applyMigrations across processes on PostgreSQL", () => {
  const name = uniqueName("core_test_race");
  let first: DatabaseHandle;
  let second: DatabaseHandle;
  beforeAll(async () => {
    const admin = new pg.Client({ connectionString: postgresUrl });
    await admin.connect();
    await admin.query(`create database ${name}`);
    await admin.end();
    const url = new URL(postgresUrl!);
    url.pathname = `/${name}`;
    // two pools on one database: two replicas starting together
    first = await openDatabase({ url: url.toString(), poolSize: 2 });
    second = await openDatabase({ url: url.toString(), poolSize: 2 });
  });
  afterAll(async () => {
    await first?.close();
    await second?.close();
    const admin = new pg.Client({ connectionString: postgresUrl });
    await admin.connect();
    await admin.query(`drop database if exists ${name} with (force)`);
    await admin.end();
  });

  it("lets two replicas migrate at once: both succeed and each migration runs exactly once", async () => {
    // the sleep keeps the first run inside its transaction while the second arrives
    const folder = migrationsFolder([
      `create schema race;\n--> statement-breakpoint\ncreate table race.runs (n int);\n--> statement-breakpoint\nselect pg_sleep(0.3);\n--> statement-breakpoint\ninsert into race.runs values (1);`,
      `insert into race.runs values (2);`,
    ]);
    const results = await Promise.all([applyMigrations(first.db, "race", folder), applyMigrations(second.db, "race", folder)]);
    expect(results.sort()).toEqual([0, 2]);
    expect(await count(first.db, "race.runs")).toBe(2);
    expect(await appliedHashes(second.db, "race")).toHaveLength(2);
  });

  it("lets two replicas apply the real registry migrations at once", async () => {
    const results = await Promise.all([
      applyMigrations(first.db, "platform-registry", registryMigrations),
      applyMigrations(second.db, "platform-registry", registryMigrations),
    ]);
    expect(results.sort()).toEqual([0, 1]);
    expect(await tableExists(first.db, "registry.platforms")).toBe(true);
  });
});
