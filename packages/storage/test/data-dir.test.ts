import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, utimesSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { sql } from "drizzle-orm";
import { afterAll, describe, expect, it } from "vitest";
import { DataDirLockedError, lockDataDir, openDatabase, rowsOf } from "@core/storage";

const root = mkdtempSync(join(tmpdir(), "core-datadir-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

let n = 0;
const freshDir = () => {
  const dir = join(root, `d${n++}`);
  mkdirSync(dir);
  return dir;
};

async function lockFailure(dir: string): Promise<unknown> {
  try {
    const release = await lockDataDir(dir);
    await release();
  } catch (err) {
    return err;
  }
  return undefined;
}

describe("lockDataDir", () => {
  it("refuses a second lock on a held directory with DataDirLockedError and a clear message", async () => {
    const dir = freshDir();
    const release = await lockDataDir(dir);
    try {
      const err = await lockFailure(dir);
      expect(err).toBeInstanceOf(DataDirLockedError);
      expect((err as DataDirLockedError).dataDir).toBe(dir);
      expect((err as Error).message).toBe(
        `The data directory ${dir} is in use by another core process. ` +
          `Stop that process first, or give this one its own directory with CORE_DATA_DIR.`,
      );
    } finally {
      await release();
    }
  });

  it("grants the lock again once it is released", async () => {
    const dir = freshDir();
    await (await lockDataDir(dir))();
    const again = await lockDataDir(dir);
    await again();
  });

  it("locks different directories independently", async () => {
    const a = await lockDataDir(freshDir());
    const b = await lockDataDir(freshDir());
    await a();
    await b();
  });

  it("takes over the lock of a crashed holder once it is stale (older than 15 s)", async () => {
    const dir = freshDir();
    // what a killed process leaves behind: the lock directory, no longer refreshed
    mkdirSync(join(dir, "core.lock"));
    const longAgo = new Date(Date.now() - 17_000);
    utimesSync(join(dir, "core.lock"), longAgo, longAgo);
    const release = await lockDataDir(dir);
    await release();
  });

  it("keeps a fresh lock of another holder (younger than 15 s)", async () => {
    const dir = freshDir();
    mkdirSync(join(dir, "core.lock"));
    const recently = new Date(Date.now() - 13_000);
    utimesSync(join(dir, "core.lock"), recently, recently);
    expect(await lockFailure(dir)).toBeInstanceOf(DataDirLockedError);
  });
});

describe("lockDataDir between processes", () => {
  it("refuses the lock to this process while another process holds it, and grants it once that one releases", async () => {
    const dir = freshDir();
    const script = join(root, "hold-lock.mjs");
    // the real lockDataDir, bundled for a plain node child process
    await build({
      entryPoints: [fileURLToPath(new URL("../src/data-dir-lock.ts", import.meta.url))],
      bundle: true,
      platform: "node",
      format: "esm",
      outfile: script,
      banner: { js: "import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);" },
      footer: {
        js: `const release = await lockDataDir(process.argv[2]); console.log("locked");
process.stdin.resume(); process.stdin.on("end", async () => { await release(); console.log("released"); process.exit(0); });`,
      },
      logLevel: "silent",
    });
    const child = spawn(process.execPath, [script, dir], { stdio: ["pipe", "pipe", "inherit"] });
    const said = (word: string) =>
      new Promise<void>((resolve, reject) => {
        child.stdout.on("data", (chunk: Buffer) => chunk.toString().includes(word) && resolve());
        child.once("exit", (code) => reject(new Error(`child exited (${code}) before saying ${word}`)));
      });
    try {
      await said("locked");
      const err = await lockFailure(dir);
      expect(err).toBeInstanceOf(DataDirLockedError);
      const released = said("released");
      child.stdin.end();
      await released;
      const release = await lockDataDir(dir);
      await release();
    } finally {
      child.kill();
    }
  });
});

describe("openDatabase with a data directory", () => {
  it("persists data across close and reopen", async () => {
    const dir = freshDir();
    const first = await openDatabase({ dataDir: dir });
    expect(first.kind).toBe("pglite");
    await first.db.execute(sql`create table kept (id int primary key, note text)`);
    await first.db.execute(sql`insert into kept values (1, 'still here')`);
    await first.close();

    const second = await openDatabase({ dataDir: dir });
    try {
      const rows = rowsOf<{ id: number; note: string }>(await second.db.execute(sql`select id, note from kept`));
      expect(rows).toEqual([{ id: 1, note: "still here" }]);
    } finally {
      await second.close();
    }
  });

  it("creates a missing directory and holds its lock while open, so a second opener gets DataDirLockedError", async () => {
    const dir = join(root, "not", "yet", "there");
    const handle = await openDatabase({ dataDir: dir });
    try {
      await expect(openDatabase({ dataDir: dir })).rejects.toBeInstanceOf(DataDirLockedError);
      await handle.ping();
    } finally {
      await handle.close();
      await handle.close(); // a second close is harmless
    }
    // closing released it
    const release = await lockDataDir(dir);
    await release();
  });
});
