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
 * new data directory starts as a copy of it; an in-memory database (the tests') loads the same files
 * from a tar archive of them. Either way it is what initdb would have written.
 */
export interface PgliteTemplate {
  /** the data directory initdb wrote */
  dir: string;
  /** the same files as one tar archive, for PGlite's `loadDataDir` */
  archive: string;
}

/** Where PGlite is installed, and the template made with that version (under `cacheDir` when given). */
function locate(cacheDir?: string): { entry: string; home: string; template: PgliteTemplate } | null {
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
  const home = join(cacheDir ?? join(nodeModules, ".cache", "core"), `pglite-${version}`);
  return { entry, home, template: { dir: join(home, "pgdata"), archive: join(home, "pgdata.tar") } };
}

/**
 * The template, made first when missing; null when PGlite is not where we can find it. It lives in
 * `node_modules/.cache/core/pglite-<version>/`, so a new PGlite version gets a new one.
 */
export async function pgliteTemplate(cacheDir?: string): Promise<PgliteTemplate | null> {
  const found = locate(cacheDir);
  if (!found) return null;
  if (existsSync(found.template.archive)) return found.template;
  // made beside its final place and renamed, so a reader never sees half of one, and of two
  // processes making it at once, one wins and the other's copy is thrown away
  const making = `${found.home}.${process.pid}-${randomBytes(4).toString("hex")}`;
  mkdirSync(making, { recursive: true });
  try {
    await initdbInChild(found.entry, join(making, "pgdata"), join(making, "pgdata.tar"));
    try {
      renameSync(making, found.home);
    } catch (err) {
      if (existsSync(found.template.archive)) return found.template;
      // a directory without its archive is not a template (left by an older layout): replace it
      if (!existsSync(found.home)) throw err;
      rmSync(found.home, { recursive: true, force: true });
      renameSync(making, found.home);
    }
    return found.template;
  } finally {
    rmSync(making, { recursive: true, force: true });
  }
}

let archiveRead: Promise<Blob | null> | undefined;

/** The template's archive as a Blob for `loadDataDir`, read once per process; null without one. */
export function pgliteTemplateArchive(): Promise<Blob | null> {
  archiveRead ??= pgliteTemplate()
    .then((template) => (template ? new Blob([readFileSync(template.archive)]) : null))
    .catch(() => null);
  return archiveRead;
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
  cpSync(template.dir, partial, { recursive: true });
  renameSync(partial, pgdata);
  return true;
}

/** Runs PGlite's initdb into `dir`, and archives the result, in a child process whose memory goes when it exits. */
function initdbInChild(entry: string, dir: string, archive: string): Promise<void> {
  const script = `const { PGlite } = await import(${JSON.stringify(pathToFileURL(entry).href)});
const { writeFileSync } = await import("node:fs");
const [dir, archive] = process.argv.slice(1);
const db = new PGlite(dir);
await db.waitReady;
const dump = await db.dumpDataDir("none");
writeFileSync(archive, Buffer.from(await dump.arrayBuffer()));
await db.close();`;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--input-type=module", "-e", script, dir, archive], { stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr!.setEncoding("utf8").on("data", (text: string) => (stderr += text));
    child.once("error", reject);
    child.once("exit", (code) => (code === 0 ? resolve() : reject(new Error(`PGlite initdb exited ${code}: ${stderr.slice(0, 500)}`))));
  });
}
