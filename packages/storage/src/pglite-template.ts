import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { cpSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, sep } from "node:path";
import { pathToFileURL } from "node:url";

/**
 * A fresh PGlite data directory costs an initdb: about 2.6 s and 450 MB more resident memory than
 * opening an existing one, memory the process never gives back (ADR 0016). So the first one is made
 * once per installation, in a child process (`npm ci` runs it through scripts/prepare.mjs), and every
 * new data directory starts as a copy of it. The copy is what initdb would have written.
 */

/** Where PGlite is installed, and the template made with that version (under `cacheDir` when given). */
function locate(cacheDir?: string): { entry: string; template: string } | null {
  let cjs: string;
  try {
    cjs = createRequire(import.meta.url).resolve("@electric-sql/pglite");
  } catch {
    return null;
  }
  const marker = `${sep}node_modules${sep}`;
  const at = cjs.lastIndexOf(marker);
  if (at < 0) return null;
  const nodeModules = cjs.slice(0, at + marker.length - 1);
  const packageDir = join(nodeModules, "@electric-sql", "pglite");
  let version: string;
  try {
    version = (JSON.parse(readFileSync(join(packageDir, "package.json"), "utf8")) as { version: string }).version;
  } catch {
    return null;
  }
  const entry = join(dirname(cjs), "index.js");
  if (!existsSync(entry)) return null;
  return { entry, template: join(cacheDir ?? join(nodeModules, ".cache", "core"), `pglite-${version}`, "pgdata") };
}

/**
 * The template's directory, made first when missing; null when it cannot be made here. It lives in
 * `node_modules/.cache/core/pglite-<version>/`, so a new PGlite version gets a new one.
 */
export async function pgliteTemplate(cacheDir?: string): Promise<string | null> {
  const found = locate(cacheDir);
  if (!found) return null;
  if (existsSync(join(found.template, "PG_VERSION"))) return found.template;
  // made beside its final place and renamed, so a reader never sees half of one, and of two
  // processes making it at once, one wins and the other's copy is thrown away
  const making = `${found.template}.${process.pid}-${randomBytes(4).toString("hex")}`;
  mkdirSync(dirname(found.template), { recursive: true });
  try {
    await initdbInChild(found.entry, making);
    try {
      renameSync(making, found.template);
    } catch (err) {
      if (!existsSync(join(found.template, "PG_VERSION"))) throw err;
    }
    return found.template;
  } finally {
    rmSync(making, { recursive: true, force: true });
  }
}

/**
 * A new data directory at `pgdata`: a copy of the template (copied beside it, then renamed, so a
 * crash mid-copy leaves nothing that looks like a database). Answers false when there is no
 * template, and PGlite's own initdb makes the directory instead.
 */
export async function seedDataDir(pgdata: string, cacheDir?: string): Promise<boolean> {
  if (existsSync(pgdata)) return false;
  // without a template (no node_modules to keep it in, or initdb failed in the child), PGlite's own
  // initdb in this process makes the directory, as slowly as ever
  const template = await pgliteTemplate(cacheDir).catch(() => null);
  if (!template) return false;
  const partial = `${pgdata}.partial`;
  rmSync(partial, { recursive: true, force: true });
  cpSync(template, partial, { recursive: true });
  renameSync(partial, pgdata);
  return true;
}

/** Runs PGlite's initdb into `dir` in a child process, whose memory goes when it exits. */
function initdbInChild(entry: string, dir: string): Promise<void> {
  const script = `const { PGlite } = await import(${JSON.stringify(pathToFileURL(entry).href)});
const db = new PGlite(process.argv[1]);
await db.waitReady;
await db.close();`;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--input-type=module", "-e", script, dir], { stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr!.setEncoding("utf8").on("data", (text: string) => (stderr += text));
    child.once("error", reject);
    child.once("exit", (code) => (code === 0 ? resolve() : reject(new Error(`PGlite initdb exited ${code}: ${stderr.slice(0, 500)}`))));
  });
}
