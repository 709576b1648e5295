import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sql } from "drizzle-orm";
import { afterAll, describe, expect, it } from "vitest";
import { PGlite } from "@electric-sql/pglite";
import { openDatabase, pgliteTemplate, pgliteTemplateArchive, rowsOf, seedDataDir } from "@core/storage";

/**
 * The PGlite template (ADR 0016): made once by a real initdb in a child process, copied into every
 * new data directory. Each test here has its own cache directory, never the installation's.
 */
const scratch = mkdtempSync(join(tmpdir(), "core-template-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
let n = 0;
const dir = (label: string) => join(scratch, `${label}-${n++}`);
/** one cache for the tests that only need a template to exist (each initdb costs seconds) */
const shared = dir("cache");

describe("the PGlite template", { timeout: 120_000 }, () => {
  it("is made by initdb in a child process, once, even when two ask at the same moment; nothing half-made is left", async () => {
    const cache = shared;
    const [a, b] = await Promise.all([pgliteTemplate(cache), pgliteTemplate(cache)]);
    expect(a).toEqual(b);
    expect(a!.dir).toMatch(new RegExp(`^${cache}/pglite-\\d+\\.\\d+\\.\\d+[^/]*/pgdata$`));
    expect(a!.archive).toBe(`${a!.dir}.tar`);
    expect(readFileSync(join(a!.dir, "PG_VERSION"), "utf8").trim()).toMatch(/^\d+$/);
    // only the template itself: the losing copy and every temporary directory are gone
    expect(readdirSync(join(a!.dir, "..")).sort()).toEqual(["pgdata", "pgdata.tar"]);
    expect(readdirSync(cache)).toEqual([a!.dir.split("/").at(-2)]);
    // asked again, it is found, not made
    const started = Date.now();
    expect(await pgliteTemplate(cache)).toEqual(a);
    expect(Date.now() - started).toBeLessThan(1_000);
  });

  it("a new data directory starts as a copy: PGlite opens it, keeps what is written, and the template stays untouched", async () => {
    const cache = shared;
    const template = (await pgliteTemplate(cache))!.dir;
    const before = readdirSync(template).sort();
    const dataDir = dir("data");
    mkdirSync(dataDir);
    expect(await seedDataDir(join(dataDir, "pgdata"), cache)).toBe(true);
    expect(existsSync(join(dataDir, "pgdata.partial"))).toBe(false);

    // openDatabase takes the seeded directory as it is (its own seeding finds one and does nothing)
    const first = await openDatabase({ dataDir });
    await first.db.execute(sql`create table kept (v text)`);
    await first.db.execute(sql`insert into kept values ('still here')`);
    await first.close();
    const again = await openDatabase({ dataDir });
    expect(rowsOf<{ v: string }>(await again.db.execute(sql`select v from kept`))).toEqual([{ v: "still here" }]);
    await again.close();

    // the template is what initdb wrote, never the data written into a copy
    expect(readdirSync(template).sort()).toEqual(before);
    const other = dir("data");
    mkdirSync(other);
    await seedDataDir(join(other, "pgdata"), cache);
    const fresh = await openDatabase({ dataDir: other });
    expect(rowsOf(await fresh.db.execute(sql`select 1 from pg_tables where tablename = 'kept'`))).toEqual([]);
    await fresh.close();
  });

  it("leaves a data directory that exists alone, and replaces what a copy cut short left behind", async () => {
    const cache = shared;
    const existing = join(dir("data"), "pgdata");
    mkdirSync(existing, { recursive: true });
    writeFileSync(join(existing, "mine"), "x");
    expect(await seedDataDir(existing, cache)).toBe(false);
    expect(readdirSync(existing)).toEqual(["mine"]);

    const pgdata = join(dir("data"), "pgdata");
    mkdirSync(`${pgdata}.partial`, { recursive: true });
    writeFileSync(join(`${pgdata}.partial`, "half"), "x");
    expect(await seedDataDir(pgdata, cache)).toBe(true);
    expect(existsSync(`${pgdata}.partial`)).toBe(false);
    expect(existsSync(join(pgdata, "half"))).toBe(false);
    expect(existsSync(join(pgdata, "PG_VERSION"))).toBe(true);
  });

  it("an in-memory database loads the installation's template archive instead of running initdb", async () => {
    const archive = await pgliteTemplateArchive();
    expect(archive).toBeInstanceOf(Blob);
    expect(archive!.size).toBeGreaterThan(1_000_000);
    const db = new PGlite({ loadDataDir: archive! });
    expect((await db.query<{ one: number }>("select 1 as one")).rows).toEqual([{ one: 1 }]);
    await db.close();
    // read once per process
    expect(await pgliteTemplateArchive()).toBe(archive);
  });

  it("a directory without its archive (an older layout) is replaced by a whole template", async () => {
    const cache = shared;
    const made = (await pgliteTemplate(cache))!;
    rmSync(made.archive);
    expect(await pgliteTemplate(cache)).toEqual(made);
    expect(existsSync(made.archive)).toBe(true);
    expect(existsSync(join(made.dir, "PG_VERSION"))).toBe(true);
  });

  it("when the template cannot be made, seeding says so and PGlite's own initdb makes the directory", async () => {
    // a file where the cache directory should be: nothing can be made under it
    const blocked = dir("blocked");
    writeFileSync(blocked, "not a directory");
    await expect(pgliteTemplate(blocked)).rejects.toThrow();
    const pgdata = join(dir("data"), "pgdata");
    expect(await seedDataDir(pgdata, blocked)).toBe(false);
    expect(existsSync(pgdata)).toBe(false);
  });
});
