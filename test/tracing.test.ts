import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger, listen, startTracing, type RunningServer, type Tracing } from "@core/kit";
import { applyMigrations, openDatabase, testDatabases, type DatabaseHandle } from "@core/storage";
import { remoteResolvers, ServiceTokenClient } from "@core/service-auth";
import { createApp as createIam } from "../services/iam/src/app.js";
import { migrationsFolder as iamMigrations } from "../services/iam/src/index.js";
import { createApp as createRegistry } from "../services/platform-registry/src/app.js";
import { migrationsFolder as registryMigrations } from "../services/platform-registry/src/index.js";
import { freePort, REGISTRY_SECRET, testConfig, uniqueEmail } from "../services/iam/test/support/harness.js";
import { startRegistry } from "../services/platform-registry/test/support/registry.js";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { launch, replicaPorts, type Launched } from "./support/launched.js";
import { startCollector } from "./support/otlp-collector.js";

/**
 * W3C Trace Context across services (DESIGN §10): a request to the platform registry that makes it
 * ask IAM is one trace, seen in both services' request log lines, and, with OTLP export, one tree
 * of spans at the collector. IAM and the registry run in process on one embedded database and talk
 * over real HTTP, as `npm start` runs them.
 */

const TRACE_ID = "0af7651916cd43dd8448eb211c80319c";
const CALLER_SPAN = "b7ad6b7169203331";

type LogLine = { msg?: string; path?: string; traceId?: string; spanId?: string; status?: number };

/** IAM and the platform registry listening on loopback, each logging into its own list. */
async function startPair(db: DatabaseHandle) {
  const logs = { iam: [] as LogLine[], registry: [] as LogLine[] };
  const into = (lines: LogLine[]) => ({ write: (line: string) => void lines.push(JSON.parse(line) as LogLine) });
  const [iamPort, registryPort] = [await freePort(), await freePort()];
  const iamUrl = `http://127.0.0.1:${iamPort}`;
  const registryUrl = `http://127.0.0.1:${registryPort}`;
  const iam = createIam({
    db: db.db,
    logger: createLogger("iam", "info", into(logs.iam)),
    config: testConfig({ iamUrl, registryUrl, trustedOrigins: [iamUrl] }),
    serviceCredentials: new Map([["platform-registry", REGISTRY_SECRET]]),
  });
  const tokens = new ServiceTokenClient(iamUrl, { serviceId: "platform-registry", secret: REGISTRY_SECRET });
  const registry = createRegistry({
    db: db.db,
    logger: createLogger("platform-registry", "info", into(logs.registry)),
    credentials: remoteResolvers({ iamUrl, serviceId: "platform-registry", tokens }),
  });
  const servers: RunningServer[] = [await listen(iam, iamPort, "127.0.0.1"), await listen(registry, registryPort, "127.0.0.1")];

  /** a new user's session token, signed up through IAM's own route */
  const session = async (): Promise<string> => {
    const email = uniqueEmail("traced");
    const response = await fetch(`${iamUrl}/api/auth/sign-up/email`, {
      method: "POST",
      headers: { "content-type": "application/json", origin: iamUrl },
      body: JSON.stringify({ email, password: "correct-horse-battery", name: "traced" }),
    });
    if (response.status !== 200) throw new Error(`sign-up answered ${response.status}`);
    return ((await response.json()) as { token: string }).token;
  };

  return {
    logs,
    registryUrl,
    session,
    close: async () => {
      for (const server of servers) await server.close();
    },
  };
}

async function migratedDatabase(): Promise<DatabaseHandle> {
  const db = await openDatabase({});
  await applyMigrations(db.db, "iam", iamMigrations);
  await applyMigrations(db.db, "platform-registry", registryMigrations);
  return db;
}

const requestLines = (lines: LogLine[], path: string) => lines.filter((line) => line.msg === "request" && line.path === path);

describe("one trace in two services' logs", { timeout: 60_000 }, () => {
  let db: DatabaseHandle;
  let pair: Awaited<ReturnType<typeof startPair>>;
  beforeAll(async () => {
    db = await migratedDatabase();
    pair = await startPair(db);
  });
  afterAll(async () => {
    await pair?.close();
    await db?.close();
  });

  it("a caller's traceparent: the registry's request line and IAM's line for the session check it made name the same trace", async () => {
    const token = await pair.session();
    const response = await fetch(`${pair.registryUrl}/platforms`, { headers: { authorization: `Bearer ${token}`, traceparent: `00-${TRACE_ID}-${CALLER_SPAN}-01` } });
    await response.body?.cancel();
    expect(response.status).toBeLessThan(500);

    const [registryLine] = requestLines(pair.logs.registry, "/platforms");
    expect(registryLine).toMatchObject({ traceId: TRACE_ID, status: response.status });
    const [iamLine] = requestLines(pair.logs.iam, "/api/validate-session").filter((line) => line.traceId === TRACE_ID);
    expect(iamLine).toMatchObject({ traceId: TRACE_ID, status: 200 });
    // each service its own span in the trace
    expect(new Set([CALLER_SPAN, registryLine!.spanId, iamLine!.spanId]).size).toBe(3);
  });

  it("no traceparent: the trace the registry starts is the one IAM logs", async () => {
    const token = await pair.session();
    const response = await fetch(`${pair.registryUrl}/platforms?limit=1`, { headers: { authorization: `Bearer ${token}` } });
    await response.body?.cancel();
    const registryLine = requestLines(pair.logs.registry, "/platforms").at(-1)!;
    expect(registryLine.traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(registryLine.traceId).not.toBe(TRACE_ID);
    expect(requestLines(pair.logs.iam, "/api/validate-session").map((line) => line.traceId)).toContain(registryLine.traceId);
  });
});

// OTLP's SpanKind (opentelemetry-proto trace.proto)
const SERVER = 2;
const CLIENT = 3;

describe("spans exported over OTLP", { timeout: 60_000 }, () => {
  let db: DatabaseHandle;
  let collector: Awaited<ReturnType<typeof startCollector>>;
  let pair: Awaited<ReturnType<typeof startPair>>;
  let tracings: Tracing[] = [];
  const serviceName = process.env.OTEL_SERVICE_NAME;

  beforeAll(async () => {
    collector = await startCollector();
    // the exporter reads its endpoint from the environment, as the SDK documents
    process.env.OTEL_EXPORTER_OTLP_ENDPOINT = collector.url;
    process.env.OTEL_BSP_SCHEDULE_DELAY = "100";
    delete process.env.OTEL_SERVICE_NAME;
    tracings = [await startTracing("iam"), await startTracing("platform-registry")];
    db = await migratedDatabase();
    pair = await startPair(db);
  });
  afterAll(async () => {
    await pair?.close();
    for (const tracing of tracings) await tracing.shutdown();
    await db?.close();
    await collector?.close();
    delete process.env.OTEL_EXPORTER_OTLP_ENDPOINT;
    delete process.env.OTEL_BSP_SCHEDULE_DELAY;
    if (serviceName !== undefined) process.env.OTEL_SERVICE_NAME = serviceName;
  });

  it("a request through the registry and IAM arrives as one trace: the registry's server span, its client span to IAM, IAM's server span under it", async () => {
    const token = await pair.session();
    const response = await fetch(`${pair.registryUrl}/platforms`, { headers: { authorization: `Bearer ${token}` } });
    await response.body?.cancel();
    const registryLine = requestLines(pair.logs.registry, "/platforms").at(-1)!;
    for (const tracing of tracings) await tracing.shutdown();

    expect(collector.exports.length).toBeGreaterThan(0);
    for (const { path, contentType } of collector.exports) {
      expect(path).toBe("/v1/traces");
      expect(contentType).toBe("application/json");
    }
    const trace = collector.spans().filter((span) => span.traceId === registryLine.traceId);
    const server = trace.find((span) => span.service === "platform-registry" && span.kind === SERVER)!;
    expect(server).toMatchObject({ name: "GET /platforms", spanId: registryLine.spanId });
    expect(server.parentSpanId ?? "").toBe("");
    expect(server.attributes).toEqual(
      expect.arrayContaining([
        { key: "http.request.method", value: { stringValue: "GET" } },
        { key: "http.route", value: { stringValue: "/platforms" } },
        { key: "http.response.status_code", value: { intValue: response.status } },
      ]),
    );
    const check = trace.find((span) => span.service === "platform-registry" && span.kind === CLIENT && span.attributes.some((a) => a.value.stringValue?.endsWith("/api/validate-session")))!;
    expect(check).toMatchObject({ name: "POST", parentSpanId: server.spanId });
    const iamServer = trace.find((span) => span.service === "iam" && span.kind === SERVER && span.name === "POST /api/validate-session")!;
    expect(iamServer.parentSpanId).toBe(check.spanId);
    // IAM's log line names the span it exported
    const iamLine = requestLines(pair.logs.iam, "/api/validate-session").find((line) => line.traceId === registryLine.traceId)!;
    expect(iamLine.spanId).toBe(iamServer.spanId);
    // the service token the registry fetched on the way is in the trace too
    expect(trace.some((span) => span.service === "iam" && span.name === "POST /api/core/service-token")).toBe(true);
  });
});

describe("spans exported by `npm start`", { timeout: 120_000 }, () => {
  let collector: Awaited<ReturnType<typeof startCollector>>;
  let launched: Launched;
  const dataDir = mkdtempSync(join(tmpdir(), "core-tracing-"));
  afterAll(async () => {
    await launched?.stop();
    await collector?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  // the bundles load the SDK from node_modules (scripts/build.mjs leaves it out): this is that path
  it("each service of the one process sends its spans under its own service.name, one trace across them, and logs the trace id", async () => {
    collector = await startCollector();
    const ports = await replicaPorts(1);
    launched = launch({ ...ports.env, CORE_DATA_DIR: dataDir, OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_BSP_SCHEDULE_DELAY: "100" });
    await launched.running;
    const response = await fetch(`${ports.url("platform-registry", 0)}/platforms`, {
      headers: { authorization: "Bearer not-a-session-of-iam", traceparent: `00-${TRACE_ID}-${CALLER_SPAN}-01` },
    });
    expect(response.status).toBe(401); // IAM was asked, and said no
    await response.body?.cancel();
    await launched.stop(); // SIGTERM: what is buffered goes out

    const trace = collector.spans().filter((span) => span.traceId === TRACE_ID);
    const server = trace.find((span) => span.service === "platform-registry" && span.kind === SERVER)!;
    expect(server).toMatchObject({ name: "GET /platforms", parentSpanId: CALLER_SPAN });
    const check = trace.find((span) => span.service === "iam" && span.name === "POST /api/validate-session")!;
    const call = trace.find((span) => span.spanId === check.parentSpanId)!;
    expect(call).toMatchObject({ service: "platform-registry", kind: CLIENT, parentSpanId: server.spanId });
    const logged = launched
      .output()
      .split("\n")
      .filter((line) => line.includes(`"traceId":"${TRACE_ID}"`))
      .map((line) => JSON.parse(line) as LogLine & { service: string });
    expect(logged).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ service: "platform-registry", path: "/platforms", spanId: server.spanId }),
        expect.objectContaining({ service: "iam", path: "/api/validate-session", spanId: check.spanId }),
      ]),
    );
  });
});

describe("IAM answering 503 to a registry", { timeout: 60_000 }, () => {
  let registry: Awaited<ReturnType<typeof startRegistry>>;
  let server: RunningServer;
  beforeAll(async () => {
    registry = await startRegistry(testDatabases()[0]!);
    server = await listen(registry.app, 0, "127.0.0.1");
  });
  afterAll(async () => {
    await server?.close();
    await registry?.iam.close();
    await registry?.handle.close();
  });

  const list = (headers: Record<string, string>) => fetch(`${server.url}/platforms`, { headers });

  it("answers 503 UPSTREAM_UNAVAILABLE saying IAM is unavailable, not unreachable, with IAM's Retry-After", async () => {
    const warm = await list(registry.as.operator());
    expect(warm.status).toBe(200); // a service token is held now
    await warm.body?.cancel();
    registry.iam.failWith = 503;
    registry.iam.failRetryAfter = "17";
    try {
      const response = await list(registry.as.operator());
      expect(response.status).toBe(503);
      expect(response.headers.get("retry-after")).toBe("17");
      const body = (await response.json()) as { error: { code: string; message: string } };
      expect(body.error).toMatchObject({ code: "UPSTREAM_UNAVAILABLE", message: "IAM is unavailable (it answered 503); try again shortly" });
      // without IAM's own Retry-After, the default
      registry.iam.failRetryAfter = undefined;
      const plain = await list(registry.as.operator());
      expect(plain.status).toBe(503);
      expect(plain.headers.get("retry-after")).toBe("5");
      await plain.body?.cancel();
    } finally {
      registry.iam.failWith = undefined;
      registry.iam.failRetryAfter = undefined;
    }
    const back = await list(registry.as.operator());
    expect(back.status).toBe(200);
    await back.body?.cancel();
  });

  it("IAM out of reach keeps its words, unreachable, and gains Retry-After", async () => {
    const headers = registry.as.operator();
    await registry.iam.close();
    const response = await list(headers);
    expect(response.status).toBe(503);
    expect(response.headers.get("retry-after")).toBe("5");
    expect(((await response.json()) as { error: { message: string } }).error.message).toBe("IAM is unreachable");
  });
});

