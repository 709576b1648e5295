// How fast `npm start` gets every service healthy, and how much memory it holds then (issue 13:
// first start on a new data directory under 5 s, later starts under 2 s, resident memory under
// 600 MB). Spawns the real launcher (`node scripts/start.mjs`) on free loopback ports, polls each
// service's /health, and reads the process's resident memory from /proc when all five answer 200.
// Beside it, in the same run, the floor: a bare node:http server started the same way. Cases take
// turns round by round, so a change in machine load weighs on all of them alike. Prints figures,
// never passes or fails; stops every process it starts.
//
//   npm run bench:start                 (5 rounds)
//   BENCH_RUNS=10 npm run bench:start
//   BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres   also PostgreSQL mode (a new database per run)
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { availableParallelism, cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { root } from "../scripts/build.mjs";

const runs = Number(process.env.BENCH_RUNS ?? 5);
const databaseUrl = process.env.BENCH_DATABASE_URL ?? process.env.TEST_DATABASE_URL;
const SERVICES = ["IAM", "BILLING", "STACK_REGISTRY", "PLATFORM_REGISTRY", "VAULT"];
const TIMEOUT_MS = 60_000;

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer().once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/** Resident and peak resident memory of a process, in MB (10^6 bytes; Linux). */
function memoryOf(pid) {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kib = (key) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? NaN);
  return { rss: (kib("VmRSS") * 1024) / 1e6, peak: (kib("VmHWM") * 1024) / 1e6 };
}

async function healthy(port) {
  try {
    const res = await fetch(`http://127.0.0.1:${port}/health`);
    await res.body?.cancel();
    return res.status === 200;
  } catch {
    return false;
  }
}

/**
 * Starts `args` with `env`, waits until every port answers /health with 200, measures, stops it.
 * Answers milliseconds from spawn to all healthy, and memory at that moment.
 */
async function timeToHealthy(args, env, ports) {
  const started = performance.now();
  const child = spawn(process.execPath, args, { cwd: root, env: { ...process.env, ...env }, stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr.setEncoding("utf8").on("data", (text) => (stderr += text));
  const exited = new Promise((resolve) => child.once("exit", resolve));
  try {
    const pending = new Set(ports);
    while (pending.size > 0) {
      if (child.exitCode !== null) throw new Error(`${args.join(" ")} exited ${child.exitCode}: ${stderr.slice(0, 500)}`);
      if (performance.now() - started > TIMEOUT_MS) throw new Error(`${args.join(" ")}: not healthy within ${TIMEOUT_MS} ms`);
      for (const port of [...pending]) if (await healthy(port)) pending.delete(port);
      if (pending.size > 0) await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const ms = performance.now() - started;
    return { ms, ...memoryOf(child.pid) };
  } finally {
    child.kill("SIGTERM");
    await exited;
  }
}

/** The launcher on its own ports; `dataDir` or `databaseUrl` says where the data lives. */
async function launcher({ dataDir, url }) {
  const ports = await Promise.all(SERVICES.map(() => freePort()));
  const env = { LOG_LEVEL: "warn", NODE_ENV: "production", CORE_DATA_DIR: dataDir ?? "", DATABASE_URL: url ?? "" };
  for (const [i, name] of SERVICES.entries()) {
    env[`CORE_${name}_PORT`] = String(ports[i]);
    env[`CORE_${name}_URL`] = `http://127.0.0.1:${ports[i]}`;
  }
  if (!url) delete env.DATABASE_URL;
  return timeToHealthy(["scripts/start.mjs"], env, ports);
}

/** The floor: node starting a bare node:http server that answers /health. */
async function floor() {
  const port = await freePort();
  const code = `require("node:http").createServer((q, s) => s.end("ok")).listen(${port}, "127.0.0.1")`;
  return timeToHealthy(["-e", code], {}, [port]);
}

async function freshDatabase() {
  const name = `core_bench_start_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
  const admin = new pg.Client({ connectionString: databaseUrl });
  await admin.connect();
  await admin.query(`create database ${name}`);
  await admin.end();
  const url = new URL(databaseUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: async () => {
      const dropper = new pg.Client({ connectionString: databaseUrl });
      await dropper.connect();
      await dropper.query(`drop database if exists ${name} with (force)`);
      await dropper.end();
    },
  };
}

// `npm start -- --help` builds the launcher when a source changed, so no measured run pays for a build
await new Promise((resolve, reject) =>
  spawn(process.execPath, ["scripts/start.mjs", "--help"], { cwd: root, stdio: "ignore" }).once("exit", (code) => (code === 0 ? resolve() : reject(new Error(`npm start -- --help exited ${code}`)))),
);

const scratch = mkdtempSync(join(tmpdir(), "core-bench-start-"));
const kept = join(scratch, "kept");
const cases = [
  ["bare node:http server (the floor)", () => floor()],
  ["first start, new data directory (PGlite)", async (round) => launcher({ dataDir: join(scratch, `new-${round}`) })],
  ["later start, same data directory (PGlite)", () => launcher({ dataDir: kept })],
];
if (databaseUrl) {
  cases.push([
    "first start, new PostgreSQL database",
    async () => {
      const database = await freshDatabase();
      try {
        return await launcher({ url: database.url });
      } finally {
        await database.drop();
      }
    },
  ]);
}

console.log(`${runs} rounds; Node ${process.versions.node}; ${cpus()[0]?.model.trim()}; load average ${loadavg()[0].toFixed(2)} on ${availableParallelism()} cores\n`);
// the kept data directory is made before the rounds, so every "later" run finds one
await launcher({ dataDir: kept });
const results = cases.map(() => []);
try {
  for (let round = 0; round < runs; round++) {
    for (const [i, [, run]] of cases.entries()) results[i].push(await run(round));
  }
} finally {
  rmSync(scratch, { recursive: true, force: true });
}

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const figures = results.map((list) => ({ ms: median(list.map((r) => r.ms)), min: Math.min(...list.map((r) => r.ms)), max: Math.max(...list.map((r) => r.ms)), rss: median(list.map((r) => r.rss)), peak: Math.max(...list.map((r) => r.peak)) }));
const base = figures[0];
for (const [i, [title]] of cases.entries()) {
  const f = figures[i];
  const ratio = i === 0 ? "" : `  = ${(f.ms / base.ms).toFixed(1)}× the floor`;
  console.log(`${title.padEnd(44)} healthy after ${f.ms.toFixed(0).padStart(5)} ms (min ${f.min.toFixed(0)}, max ${f.max.toFixed(0)})${ratio}; resident ${f.rss.toFixed(0)} MB, peak ${f.peak.toFixed(0)} MB`);
}
const [, first, later] = figures;
console.log(`\ntargets: first start < 5000 ms → ${first.ms.toFixed(0)} ms; later start < 2000 ms → ${later.ms.toFixed(0)} ms; resident memory < 600 MB → ${Math.max(first.rss, later.rss).toFixed(0)} MB (peak ${Math.max(first.peak, later.peak).toFixed(0)} MB)`);
