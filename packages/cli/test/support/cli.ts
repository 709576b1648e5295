import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

export const repoRoot = fileURLToPath(new URL("../../../../", import.meta.url));

const scratchDirs: string[] = [];

/** A new temporary directory, removed by `removeScratchDirs` (each suite's afterAll). */
export function scratchDir(label: string): string {
  const dir = mkdtempSync(join(tmpdir(), `core-cli-${label}-`));
  scratchDirs.push(dir);
  return dir;
}

export function removeScratchDirs() {
  for (const dir of scratchDirs.splice(0)) rmSync(dir, { recursive: true, force: true });
}

/** Builds the `core` executable with the repository's build (scripts/build.mjs) into a fresh directory. */
export async function buildCli(): Promise<string> {
  const outfile = join(scratchDir("build"), "core.js");
  const build = await import(pathToFileURL(join(repoRoot, "scripts/build.mjs")).href);
  await build.bundleCli(outfile);
  return outfile;
}

/** A fresh directory for `CORE_HOME` (it does not exist yet: `core login` creates it). */
export const freshHome = () => join(scratchDir("home"), ".core");

export interface Finished {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** A running `core` process whose output the test can wait for, line by line. */
export class CoreProcess {
  readonly child: ChildProcess;
  stdout = "";
  stderr = "";
  /** every stderr line with the time it arrived (CORE_DEBUG=1 logs each request to IAM there) */
  readonly stderrLines: { at: number; line: string }[] = [];
  readonly finished: Promise<Finished>;
  private readonly waiters = new Set<() => void>();

  /**
   * `terminal: true` runs core on a pseudo-terminal (util-linux `script`), as a person at a terminal
   * does: standard input is a TTY, stays open for `type`, and stdout and stderr arrive together in
   * `stdout`, with CRLF line ends.
   */
  constructor(bin: string, args: string[], options: { env?: Record<string, string>; stdin?: string; terminal?: boolean }) {
    // only what the test gives: no CORE_* from the runner's environment, HOME away from the real ~/.core
    const env = { PATH: process.env.PATH ?? "", HOME: scratchDir("user"), ...options.env };
    this.child = options.terminal
      ? spawn("script", ["--quiet", "--return", "--command", [process.execPath, bin, ...args].map(shellQuote).join(" "), "/dev/null"], { env, stdio: ["pipe", "pipe", "pipe"] })
      : spawn(process.execPath, [bin, ...args], { env, stdio: ["pipe", "pipe", "pipe"] });
    this.child.stdout!.setEncoding("utf8").on("data", (text: string) => {
      this.stdout += text;
      this.notify();
    });
    let partial = "";
    this.child.stderr!.setEncoding("utf8").on("data", (text: string) => {
      this.stderr += text;
      partial += text;
      const lines = partial.split("\n");
      partial = lines.pop()!;
      for (const line of lines) this.stderrLines.push({ at: Date.now(), line });
      this.notify();
    });
    if (!options.terminal) this.child.stdin!.end(options.stdin ?? "");
    this.finished = new Promise((resolve) => this.child.once("close", (code) => resolve({ code, stdout: this.stdout, stderr: this.stderr })));
  }

  /** Types `text` at the terminal (`terminal: true`). */
  type(text: string) {
    this.child.stdin!.write(text);
  }

  /** Resolves with the first match of `pattern` in stdout + stderr. */
  waitFor(pattern: RegExp, timeoutMs = 15_000): Promise<RegExpMatchArray> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const match = (this.stdout + this.stderr).match(pattern);
        if (!match) return false;
        this.waiters.delete(check);
        clearTimeout(timer);
        resolve(match);
        return true;
      };
      const timer = setTimeout(() => {
        this.waiters.delete(check);
        reject(new Error(`no ${pattern} in the output within ${timeoutMs} ms:\n${this.stdout}\n${this.stderr}`));
      }, timeoutMs);
      if (!check()) this.waiters.add(check);
    });
  }

  private notify() {
    for (const check of [...this.waiters]) check();
  }
}

export const runCli = (bin: string, args: string[], options: { env?: Record<string, string>; stdin?: string } = {}) =>
  new CoreProcess(bin, args, options).finished;

const shellQuote = (word: string) => `'${word.replace(/'/g, "'\\''")}'`;

/** A JS stack frame line: a failure must never print one. */
export const STACK_FRAME = /^\s+at .+\(?.*:\d+:\d+\)?$/m;
