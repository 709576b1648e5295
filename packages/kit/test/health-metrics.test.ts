import { createServer, connect, type Server, type Socket } from "node:net";
import { fileURLToPath } from "node:url";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ServiceMetrics, createServiceApp, silentLogger, workerBacklogSource } from "@core/kit";
import { applyMigrations, databaseReadyCheck, openDatabase, openFreshPostgres, poolStats, rowsOf, testDatabases, type DatabaseHandle, type Db } from "@core/storage";
import { parsePrometheus, valueOf } from "./support/prometheus.js";

/** a real service's migrations, to be applied or not */
const MIGRATIONS = fileURLToPath(new URL("../../../services/platform-registry/drizzle", import.meta.url));
const SERVICE = "platform-registry";

/** An app as a service builds it for the launcher: readiness of its database, process and pool metrics, a backlog read from the database. */
function serviceOn(db: Db, service = "kit-test") {
  const metrics = new ServiceMetrics(service, { processMetrics: true, databasePool: () => poolStats(db) });
  metrics.addGaugeSource(
    workerBacklogSource("test_worker", async () => {
      const [row] = rowsOf<{ due: number }>(await db.execute(sql`select count(*)::int as due from public.core_migrations where service = ${SERVICE}`));
      return [{ job: "test_job", due: Number(row?.due ?? 0), oldestDueSeconds: 0 }];
    }),
  );
  return createServiceApp({ service, title: "t", logger: silentLogger(), metrics, readinessChecks: [databaseReadyCheck(db, SERVICE, MIGRATIONS)] });
}

async function scrape(app: ReturnType<typeof serviceOn>) {
  const res = await app.request("/metrics");
  expect(res.status).toBe(200);
  return parsePrometheus(await res.text());
}

type Health = { status: string; checks: Record<string, { status: string; error?: string }> };

/** Polls until `probe` answers true, for up to 30 s (a loaded machine is slow, never wrong). */
async function eventually(probe: () => Promise<boolean>): Promise<void> {
  const until = Date.now() + 30_000;
  while (!(await probe())) {
    if (Date.now() > until) throw new Error("the condition never held");
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe("/health/live", () => {
  it("answers 200 while the process runs, whatever the readiness checks say, and runs none of them", async () => {
    let asked = 0;
    const app = createServiceApp({ service: "kit-test", title: "t", logger: silentLogger(), readinessChecks: [{ name: "database", check: async () => void asked++ }] });
    const live = await app.request("/health/live");
    expect(live.status).toBe(200);
    expect(await live.json()).toEqual({ status: "live" });
    expect(asked).toBe(0);
  });
});

describe("process metrics", () => {
  it("are shown by every service of one process, each under its own label, without registering a name twice", async () => {
    const a = await new ServiceMetrics("first", { processMetrics: true }).registry.metrics();
    const b = await new ServiceMetrics("second", { processMetrics: true }).registry.metrics();
    for (const [text, service] of [
      [a, "first"],
      [b, "second"],
    ] as const) {
      const { samples } = parsePrometheus(text);
      for (const name of ["process_cpu_user_seconds_total", "process_resident_memory_bytes", "nodejs_eventloop_lag_seconds", "nodejs_heap_size_used_bytes"]) {
        expect(valueOf(samples, name, { service }), `${name} of ${service}`).toBeTypeOf("number");
      }
      expect(parsePrometheus(text).described).toContain("nodejs_gc_duration_seconds");
    }
  });
});

describe.each(testDatabases())("readiness and metrics on $name", (database) => {
  let handle: DatabaseHandle;
  beforeAll(async () => {
    handle = await database.open();
  });
  afterAll(() => handle?.close());

  it("is not ready until the service's migrations are applied, then ready; /health/ready says which check failed", async () => {
    const app = serviceOn(handle.db);
    const before = await app.request("/health/ready");
    expect(before.status).toBe(503);
    expect(before.headers.get("retry-after")).toBe("5");
    const body = await before.json();
    expect(body).toMatchObject({ status: "degraded", checks: { database: { status: "fail" } } });
    await applyMigrations(handle.db, SERVICE, MIGRATIONS);
    const after = await app.request("/health/ready");
    expect(after.status).toBe(200);
    expect(after.headers.get("retry-after")).toBeNull();
    expect(await after.json()).toEqual({ status: "healthy", checks: { database: { status: "ok", latencyMs: expect.any(Number) } } });
  });

  it("shows PostgreSQL's pool (a transaction holds a connection) and none for PGlite; a held PGlite times readiness out", async () => {
    const app = serviceOn(handle.db);
    const idle = await scrape(app);
    const pooled = database.name !== "pglite";
    expect(valueOf(idle.samples, "core_db_pool_max_connections")).toBe(pooled ? 5 : undefined);
    expect(valueOf(idle.samples, "core_db_pool_connections", { state: "busy" })).toBe(pooled ? 0 : undefined);
    expect(valueOf(idle.samples, "core_db_pool_waiting")).toBe(pooled ? 0 : undefined);
    expect(valueOf(idle.samples, "core_worker_due_items", { job: "test_job" })).toBeGreaterThan(0);
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let begun!: () => void;
    const inside = new Promise<void>((resolve) => (begun = resolve));
    const transaction = handle.db.transaction(async (tx) => {
      await tx.execute(sql`select 1`);
      begun();
      await held;
    });
    await inside;
    const queued = database.name === "pglite" ? handle.db.execute(sql`select 2`) : null;
    try {
      await eventually(async () => {
        const { samples } = await scrape(app);
        // PGlite shows no pool: its one connection held is seen below, in readiness
        return !pooled || (valueOf(samples, "core_db_pool_connections", { state: "busy" }) ?? 0) >= 1;
      });
      if (database.name === "pglite") {
        // the one connection is held: readiness and the backlog's read wait their time, then give up
        const ready = await app.request("/health/ready");
        expect(ready.status).toBe(503);
        expect(((await ready.json()) as Health).checks.database).toMatchObject({ status: "fail", error: "timed out after 2000 ms" });
        const { samples } = await scrape(app);
        expect(valueOf(samples, "core_metrics_source_up", { source: "test_worker" })).toBe(0);
        expect(valueOf(samples, "core_worker_due_items", { job: "test_job" })).toBeUndefined();
        expect(valueOf(samples, "process_resident_memory_bytes")).toBeGreaterThan(0);
      }
    } finally {
      release();
      await transaction;
      await queued;
    }
    await eventually(async () => (await app.request("/health/ready")).status === 200);
    const after = await scrape(app);
    expect(valueOf(after.samples, "core_db_pool_waiting")).toBe(pooled ? 0 : undefined);
    expect(valueOf(after.samples, "core_metrics_source_up", { source: "test_worker" })).toBe(1);
  });
});

/** A TCP proxy to PostgreSQL that the test can cut (every connection ended, nothing accepted) and restore on the same port. */
async function cuttableProxy(target: URL) {
  const sockets = new Set<Socket>();
  let server: Server | null = null;
  let port = 0;
  const start = () =>
    new Promise<void>((resolve) => {
      server = createServer((client) => {
        const upstream = connect(Number(target.port || 5432), target.hostname);
        for (const socket of [client, upstream]) {
          sockets.add(socket);
          socket.on("error", () => {});
          socket.on("close", () => sockets.delete(socket));
        }
        client.pipe(upstream).pipe(client);
      });
      server.listen(port, "127.0.0.1", () => {
        port = (server!.address() as { port: number }).port;
        resolve();
      });
    });
  await start();
  return {
    url: () => {
      const proxied = new URL(target);
      proxied.hostname = "127.0.0.1";
      proxied.port = String(port);
      return proxied.toString();
    },
    cut: async () => {
      await new Promise<void>((resolve) => {
        server!.close(() => resolve());
        for (const socket of sockets) socket.destroy();
      });
    },
    restore: start,
  };
}

const url = process.env.TEST_DATABASE_URL;

describe.skipIf(!url)("readiness and metrics while PostgreSQL is unreachable", () => {
  let fresh: DatabaseHandle & { url: string };
  let proxy: Awaited<ReturnType<typeof cuttableProxy>>;
  let handle: DatabaseHandle;
  beforeAll(async () => {
    fresh = await openFreshPostgres(url!);
    await applyMigrations(fresh.db, SERVICE, MIGRATIONS);
    proxy = await cuttableProxy(new URL(fresh.url));
    handle = await openDatabase({ url: proxy.url(), poolSize: 3 });
  });
  afterAll(async () => {
    await handle?.close();
    await fresh?.close();
  });

  it("answers /health/ready 503 with Retry-After while the database is gone and 200 once it is back; /health/live and /metrics answer throughout", async () => {
    const app = serviceOn(handle.db);
    expect((await app.request("/health/ready")).status).toBe(200);
    await proxy.cut();
    try {
      await eventually(async () => (await app.request("/health/ready")).status === 503);
      const ready = await app.request("/health/ready");
      expect(ready.headers.get("retry-after")).toBe("5");
      expect(((await ready.json()) as Health).checks.database?.status).toBe("fail");
      expect((await app.request("/health/live")).status).toBe(200);
      const { samples } = await scrape(app);
      expect(valueOf(samples, "core_metrics_source_up", { source: "test_worker" })).toBe(0);
      expect(valueOf(samples, "core_worker_due_items", { job: "test_job" })).toBeUndefined();
      expect(valueOf(samples, "core_db_pool_max_connections")).toBe(3);
      expect(valueOf(samples, "process_resident_memory_bytes")).toBeGreaterThan(0);
    } finally {
      await proxy.restore();
    }
    await eventually(async () => (await app.request("/health/ready")).status === 200);
    expect(valueOf((await scrape(app)).samples, "core_metrics_source_up", { source: "test_worker" })).toBe(1);
  });
});
