// What the TypeScript benchmarks share: a throwaway PostgreSQL database, autocannon runs in a
// process of their own, a raw node:http baseline, and ratios printed so a slow figure stays readable.
import { fork } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createServer } from "node:http";
import { resolve } from "node:path";
import pg from "pg";
import { openDatabase, type DatabaseHandle } from "@core/storage";

export const serverUrl = process.env.BENCH_DATABASE_URL ?? process.env.TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";

export interface Measurement {
  rate: number;
  p50: number;
  p99: number;
  errors: number;
}

/** One autocannon run from a separate process (bench/load.mjs), so client and server do not share a thread. */
export function load(title: string, run: { url: string; headers?: Record<string, string>; connections: number; seconds: number }): Promise<Measurement> {
  return new Promise((resolveRun, reject) => {
    const child = fork(resolve("bench/load.mjs"));
    let answered = false;
    child.once("error", reject);
    child.once("exit", (code) => {
      if (!answered) reject(new Error(`bench/load.mjs exited with ${code} before answering`));
    });
    child.once("message", (m: Measurement) => {
      answered = true;
      console.log(
        `${title.padEnd(44)} ${m.rate.toFixed(0).padStart(7)} req/s   p50 ${String(m.p50).padStart(3)} ms   p99 ${String(m.p99).padStart(3)} ms${m.errors ? `   (${m.errors} errors/non-2xx)` : ""}`,
      );
      resolveRun(m);
    });
    child.send({ method: "GET", headers: {}, ...run });
  });
}

/** A new, empty PostgreSQL database on the server of `serverUrl`, dropped with force on close; `url` is its address. */
export async function freshPostgres(): Promise<DatabaseHandle & { url: string }> {
  const name = `core_bench_${randomBytes(6).toString("hex")}`;
  const admin = async (statement: string) => {
    const client = new pg.Client({ connectionString: serverUrl });
    await client.connect();
    try {
      await client.query(statement);
    } finally {
      await client.end();
    }
  };
  await admin(`create database ${name}`);
  const target = new URL(serverUrl);
  target.pathname = `/${name}`;
  const handle = await openDatabase({ url: target.toString() }).catch(async (err: unknown) => {
    await admin(`drop database if exists ${name} with (force)`);
    throw err;
  });
  return {
    ...handle,
    url: target.toString(),
    close: async () => {
      await handle.close();
      await admin(`drop database if exists ${name} with (force)`);
    },
  };
}

/** Runs `task(i)` for i < count, `width` at a time. */
export async function inParallel(count: number, width: number, task: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(width, count) }, async () => {
      while (next < count) await task(next++);
    }),
  );
}

/** two decimals, or two significant digits below 0.1, so a slow route does not print as 0.00 */
export function ratio(route: { rate: number }, raw: { rate: number }): string {
  const r = route.rate / raw.rate;
  return `${r >= 0.1 ? r.toFixed(2) : r.toPrecision(2)} × raw`;
}

/** A raw node:http server answering a small JSON document: the baseline of every route figure. */
export async function rawServer(): Promise<{ url: string; close(): void }> {
  const server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end('{"tier":"starter"}');
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, close: () => server.close() };
}
