// Benchmark of usage ingestion and usage reads (issue 12, DESIGN §6.5). Prints figures, never
// passes or fails; talks only to 127.0.0.1 and stops by itself.
//
// Ingestion: POST /usage/events over HTTP, batches of 1000 events of which 100 repeat events sent
// 8 batches earlier (duplicates, dedupe on), from a load generator in its own process, for
// BENCH_SECONDS on a fresh PostgreSQL database, beside a raw COPY of as many rows into a bare table
// on the same database; then a shorter run on PGlite. Reads: usage/current and usage/daily of a
// platform whose rollups hold 10 million events, beside a raw node:http server in the same run.
//
//   node bench/run.mjs bench/metering.ts      (npm run bench:metering)
//   BENCH_SECONDS=60 BENCH_CONNECTIONS=2 BENCH_PGLITE_SECONDS=15 BENCH_READ_SECONDS=8 (0 skips a part)
//   BENCH_COPY=0 skips the COPY baseline
//   BENCH_DATABASE_URL=postgres://user@host/db   the server to create the throwaway database on
import { fork } from "node:child_process";
import { randomBytes } from "node:crypto";
import { cpus, totalmem } from "node:os";
import { resolve } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { sql } from "drizzle-orm";
import pg from "pg";
import { from as copyFrom } from "pg-copy-streams";
import { openDatabase, rowsOf, type DatabaseHandle } from "@core/storage";
import { SERVICE_ID } from "../services/billing/src/index.js";
import { START } from "../services/billing/test/support/billing.js";
import { billingStack } from "./billing-stack.js";
import { freshPostgres, load, rawServer, ratio } from "./support.js";

const seconds = Number(process.env.BENCH_SECONDS ?? 60);
const pgliteSeconds = Number(process.env.BENCH_PGLITE_SECONDS ?? Math.max(5, Math.round(seconds / 4)));
const readSeconds = Number(process.env.BENCH_READ_SECONDS ?? 8);
const copyBaseline = process.env.BENCH_COPY !== "0";
// as many senders as cores: on 2 cores, 4 senders only queue behind each other (measured on 2026-11-24:
// 26,000-30,000 events/s with a p99 of 350-600 ms, against 36,000-40,000 and about 100 ms with 2)
const connections = Number(process.env.BENCH_CONNECTIONS ?? 2);
const BATCH = 1000;
const DUPLICATES = 100;
const LAG = 8;
const PLATFORMS = 2;
/** the events the read benchmark's rollups stand for */
const READ_EVENTS = 10_000_000;
const DAY_MS = 86_400_000;

interface IngestRun {
  requests: number;
  batches: number;
  rate: number;
  p50: number;
  p99: number;
  max: number;
  errors: number;
  accepted: number;
  duplicates: number;
  rejected: number;
  seconds: number;
}

/** Billing listening on loopback (./billing-stack.ts), with a few platforms the registry knows; a service token to report with. */
async function startBilling(database: DatabaseHandle) {
  const stack = await billingStack(database);
  const platformIds: string[] = [];
  for (let i = 0; i < PLATFORMS; i++) platformIds.push((await stack.newPlatform()).platformId);
  const service = { authorization: `Bearer ${await stack.iam.mintServiceToken({ sub: "platform-registry", aud: SERVICE_ID })}` };
  // each platform's period starts at START (its first read); the events come a day into it
  for (const platformId of platformIds) await fetch(`${stack.url}/subscription?platformId=${platformId}`, { headers: service });
  stack.clock.set(new Date(START.getTime() + DAY_MS));
  return { url: stack.url, platformIds, service, close: stack.close };
}

/** One ingestion run from bench/usage-load.mjs. */
function ingest(url: string, headers: Record<string, string>, platformIds: string[], runSeconds: number, idPrefix: string): Promise<IngestRun> {
  return new Promise((resolveRun, reject) => {
    const child = fork(resolve("bench/usage-load.mjs"));
    let answered = false;
    child.once("error", reject);
    child.once("exit", (code) => {
      if (!answered) reject(new Error(`bench/usage-load.mjs exited with ${code} before answering`));
    });
    child.once("message", (m: IngestRun) => {
      answered = true;
      resolveRun(m);
    });
    child.send({
      url: `${url}/usage/events`,
      headers,
      platformIds,
      seconds: runSeconds,
      connections,
      size: BATCH,
      duplicates: DUPLICATES,
      lag: LAG,
      // billing's (manual) now is a day into the platforms' period: every event is in it
      timestamp: Math.floor((START.getTime() + DAY_MS) / 1000) - 60,
      idPrefix,
    });
  });
}

const count = async (db: DatabaseHandle["db"], query: ReturnType<typeof sql>) => Number(rowsOf<{ n: string | number }>(await db.execute(query))[0]!.n);

/** Ingestion on one database: the run, then what was stored and whether reconcile agrees. */
async function ingestion(database: DatabaseHandle, label: string, runSeconds: number) {
  const billing = await startBilling(database);
  try {
    const run = await ingest(billing.url, billing.service, billing.platformIds, runSeconds, `e${randomBytes(3).toString("hex")}-`);
    const events = run.rate * BATCH;
    const stored = await count(database.db, sql`select count(*) as n from billing.usage_events`);
    const consistent: boolean[] = [];
    for (const platformId of billing.platformIds) {
      const recount = await fetch(`${billing.url}/operator/usage/reconcile?platformId=${platformId}`, { headers: billing.service });
      consistent.push(((await recount.json()) as { consistent: boolean }).consistent);
    }
    console.log("");
    console.log(`${label}: ${run.requests} batches of ${BATCH} (${DUPLICATES} duplicates each) in ${run.seconds} s, ${connections} connections`);
    console.log(`  ingestion   ${events.toFixed(0).padStart(7)} events/s   ${run.rate.toFixed(1)} batches/s   p50 ${run.p50} ms   p99 ${run.p99} ms   max ${run.max} ms${run.errors ? `   ${run.errors} ERRORS/non-2xx` : ""}`);
    // distinct ids in the first k batches: every batch's new events, and the first LAG batches' stand-ins for repeats
    const distinct = (k: number) => k * (BATCH - DUPLICATES) + Math.min(k, LAG) * DUPLICATES;
    const [answered, sent] = [distinct(run.requests), distinct(run.batches)];
    const bounded = stored >= answered && stored <= sent ? "as it must be" : "WRONG: outside those bounds";
    console.log(`  stored ${stored} distinct events: the ${run.requests} answered batches hold ${answered}, the ${run.batches} sent ${sent} (${bounded}); reconcile consistent: ${consistent.join(", ")}`);
    console.log(`  answers: ${run.accepted} accepted, ${run.duplicates} duplicates, ${run.rejected} rejected`);
    return { events, stored, run };
  } finally {
    await billing.close();
  }
}

/** The baseline: COPY of `rows` rows shaped like usage_events into a bare table, no keys or indexes. */
async function rawCopy(url: string, rows: number): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(`create table bench_bare (platform_id text, id text, tenant_id text, stack_id text, meter text, quantity numeric(38, 12),
      occurred_at timestamptz, period_start timestamptz, received_at timestamptz)`);
    const at = START.toISOString();
    // the rows are built before the clock starts, as the load generator builds its bodies apart
    const chunks: string[] = [];
    for (let start = 0; start < rows; start += 10_000) {
      const lines: string[] = [];
      for (let n = start; n < Math.min(rows, start + 10_000); n++) {
        lines.push(`plt_bench\tcopy-${n}\tt${n % 50}\ts${n % 4}\tapi_requests\t${(n % 997) + 1}.${String(n % 1000).padStart(3, "0")}\t${at}\t${at}\t${at}\n`);
      }
      chunks.push(lines.join(""));
    }
    const began = performance.now();
    await pipeline(Readable.from(chunks), client.query(copyFrom("copy bench_bare from stdin")));
    const rate = rows / ((performance.now() - began) / 1000);
    await client.query("drop table bench_bare");
    return rate;
  } finally {
    await client.end();
  }
}

/**
 * Reads over rollups that stand for 10 million events: 31 days × 50 tenants × 4 stacks × 3 meters
 * of daily rows and the matching per-day rows and period totals, written straight into the tables
 * for one platform, as ingestion would have left them.
 */
async function reads(database: DatabaseHandle) {
  const billing = await startBilling(database);
  try {
    const platformId = billing.platformIds[0]!;
    const subscription = (await (await fetch(`${billing.url}/subscription?platformId=${platformId}`, { headers: billing.service })).json()) as { currentPeriodStart: number };
    const periodStart = new Date(subscription.currentPeriodStart * 1000).toISOString();
    const rowsPerMeter = 31 * 50 * 4;
    const perRow = Math.floor(READ_EVENTS / 3 / rowsPerMeter);
    await database.db.execute(sql`
      insert into billing.usage_daily (platform_id, period_start, tenant_id, stack_id, meter, day, quantity)
      select ${platformId}, ${periodStart}::timestamptz, 't' || t, 's' || s, m, (${periodStart}::timestamptz)::date + d, ${perRow}
      from generate_series(0, 30) d, generate_series(0, 49) t, generate_series(0, 3) s,
           unnest(array['api_requests', 'compute_minutes', 'storage_gb_hours']) m`);
    await database.db.execute(sql`
      insert into billing.usage_days (platform_id, day, meter, period_start, quantity)
      select platform_id, day, meter, period_start, sum(quantity) from billing.usage_daily where platform_id = ${platformId} group by 1, 2, 3, 4`);
    await database.db.execute(sql`
      insert into billing.usage_totals (platform_id, period_start, meter, quantity)
      select platform_id, period_start, meter, sum(quantity) from billing.usage_daily where platform_id = ${platformId} group by 1, 2, 3`);
    const rows = await count(database.db, sql`select count(*) as n from billing.usage_daily where platform_id = ${platformId}`);
    const from = periodStart.slice(0, 10);
    const to = new Date(Date.parse(periodStart) + 30 * 86_400_000).toISOString().slice(0, 10);
    const raw = await rawServer();
    try {
      console.log("");
      console.log(`reads: one platform whose rollups stand for ${(perRow * rowsPerMeter * 3).toLocaleString("en-US")} events (${rows} daily rows), ${readSeconds} s each, 4 connections`);
      const baseline = await load("raw node:http (small JSON, same client)", { url: `${raw.url}/`, connections: 4, seconds: readSeconds });
      const current = await load("GET /usage/current", { url: `${billing.url}/usage/current?platformId=${platformId}`, headers: billing.service, connections: 4, seconds: readSeconds });
      const daily = await load("GET /usage/daily (31 days)", { url: `${billing.url}/usage/daily?platformId=${platformId}&from=${from}&to=${to}`, headers: billing.service, connections: 4, seconds: readSeconds });
      console.log(`  usage/current   ${ratio(current, baseline)}   p99 ${current.p99} ms (raw ${baseline.p99} ms)`);
      console.log(`  usage/daily     ${ratio(daily, baseline)}   p99 ${daily.p99} ms (raw ${baseline.p99} ms)`);
    } finally {
      raw.close();
    }
  } finally {
    await billing.close();
  }
}

const cpuList = cpus();
console.log(`metering benchmark: node ${process.version}, ${cpuList.length} cpus (${cpuList[0]?.model.trim() ?? "unknown"}), ${(totalmem() / 2 ** 30).toFixed(0)} GiB`);

const postgres = await freshPostgres();
try {
  const version = rowsOf<{ server_version: string }>(await postgres.db.execute(sql`show server_version`))[0]!.server_version;
  const measured = await ingestion(postgres, `PostgreSQL ${version}`, seconds);
  if (copyBaseline) {
    const copied = Math.max(100_000, Math.min(measured.stored, 2_000_000));
    const copyRate = await rawCopy(postgres.url, copied);
    console.log(`  raw COPY of ${copied} such rows into a bare table: ${copyRate.toFixed(0)} rows/s; ingestion is ${(measured.events / copyRate).toFixed(2)} × raw COPY`);
  }
  if (readSeconds > 0) await reads(postgres);
} finally {
  await postgres.close();
}

if (pgliteSeconds > 0) {
  const pglite = await openDatabase({});
  try {
    await ingestion(pglite, "PGlite (in memory, one connection)", pgliteSeconds);
  } finally {
    await pglite.close();
  }
}
process.exit(0);
