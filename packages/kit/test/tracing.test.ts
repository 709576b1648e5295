import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger, createServiceApp, exportsSpans, fetchTraced, idsOnlyTracing, parseTraceparent, retryAfterSeconds, startTracing, traceOf, UPSTREAM_RETRY_AFTER_SECONDS } from "@core/kit";

const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_ID = "00f067aa0ba902b7";
const VALID = `00-${TRACE_ID}-${PARENT_ID}-01`;

describe("traceparent (W3C Trace Context §3.2)", () => {
  it("reads a version 00 header: trace id, parent id and the sampled flag", () => {
    expect(parseTraceparent(VALID)).toEqual({ traceId: TRACE_ID, parentId: PARENT_ID, sampled: true });
    expect(parseTraceparent(`00-${TRACE_ID}-${PARENT_ID}-00`)).toEqual({ traceId: TRACE_ID, parentId: PARENT_ID, sampled: false });
    // flags other than sampled do not make it sampled
    expect(parseTraceparent(`00-${TRACE_ID}-${PARENT_ID}-02`)?.sampled).toBe(false);
  });

  it("refuses a header that breaks the format: lengths, uppercase, not hex, missing dashes", () => {
    for (const header of [
      undefined,
      "",
      `00-${TRACE_ID.slice(1)}-${PARENT_ID}-01`,
      `00-${TRACE_ID}0-${PARENT_ID}-01`,
      `00-${TRACE_ID}-${PARENT_ID.slice(1)}-01`,
      `00-${TRACE_ID}-${PARENT_ID}-1`,
      `00-${TRACE_ID.toUpperCase()}-${PARENT_ID}-01`,
      `00-${TRACE_ID}-${PARENT_ID.toUpperCase()}-01`,
      `00-${TRACE_ID.replace("4", "g")}-${PARENT_ID}-01`,
      `00_${TRACE_ID}_${PARENT_ID}_01`,
      `0-${TRACE_ID}-${PARENT_ID}-01`,
    ]) {
      expect(parseTraceparent(header), String(header)).toBeNull();
    }
  });

  it("refuses all-zero ids, version ff, and version 00 with anything after its flags", () => {
    expect(parseTraceparent(`00-${"0".repeat(32)}-${PARENT_ID}-01`)).toBeNull();
    expect(parseTraceparent(`00-${TRACE_ID}-${"0".repeat(16)}-01`)).toBeNull();
    expect(parseTraceparent(`ff-${TRACE_ID}-${PARENT_ID}-01`)).toBeNull();
    expect(parseTraceparent(`${VALID}-extra`)).toBeNull();
  });

  it("reads a later version by version 00's fields when they have its layout (§3.2.4)", () => {
    expect(parseTraceparent(`01-${TRACE_ID}-${PARENT_ID}-01`)).toEqual({ traceId: TRACE_ID, parentId: PARENT_ID, sampled: true });
    expect(parseTraceparent(`cc-${TRACE_ID}-${PARENT_ID}-01-what-comes-later`)).toEqual({ traceId: TRACE_ID, parentId: PARENT_ID, sampled: true });
    expect(parseTraceparent(`cc-${TRACE_ID}-${PARENT_ID}-01what`)).toBeNull();
  });
});

describe("a request's trace", () => {
  const lines: Record<string, unknown>[] = [];
  const logger = createLogger("tracing-test", "info", { write: (line: string) => void lines.push(JSON.parse(line)) });
  const received: IncomingHttpHeaders[] = [];
  let downstream: string;
  const server = createServer((req, res) => {
    received.push(req.headers);
    res.end("{}");
  });

  const app = createServiceApp({ service: "tracing-test", title: "t", logger });
  app.get("/hello", (c) => c.json({ trace: traceOf(c).traceId }));
  // a route that calls another service twice, as a resource service asks IAM
  app.get("/calls", async (c) => {
    for (let i = 0; i < 2; i++) await (await fetchTraced(traceOf(c), fetch, `${downstream}/next?secret=x`)).text();
    return c.json({ ok: true });
  });

  beforeAll(async () => {
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    downstream = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  const requestLine = (path: string) => lines.filter((l) => l.msg === "request" && l.path === path).at(-1)!;

  it("continues the caller's trace: its trace id in the log line, with a span id of its own", async () => {
    const response = await app.request("/hello", { headers: { traceparent: VALID } });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ trace: TRACE_ID });
    const line = requestLine("/hello");
    expect(line).toMatchObject({ traceId: TRACE_ID, status: 200 });
    expect(line.spanId).toMatch(/^[0-9a-f]{16}$/);
    expect(line.spanId).not.toBe(PARENT_ID);
  });

  it("starts a new trace when there is no traceparent, and when it is invalid, never refusing the request", async () => {
    const cases: Record<string, string>[] = [{}, { traceparent: `00-${TRACE_ID.toUpperCase()}-${PARENT_ID}-01` }, { traceparent: `00-${"0".repeat(32)}-${PARENT_ID}-01` }, { traceparent: "garbage" }];
    for (const headers of cases) {
      const response = await app.request("/hello", { headers });
      expect(response.status).toBe(200);
      const line = requestLine("/hello");
      expect(line.traceId).toMatch(/^[0-9a-f]{32}$/);
      expect(line.traceId).not.toBe(TRACE_ID);
      expect(line.traceId).not.toBe("0".repeat(32));
      expect(line.spanId).toMatch(/^[0-9a-f]{16}$/);
    }
    // each request its own trace
    await app.request("/hello");
    await app.request("/hello");
    const [a, b] = lines.filter((l) => l.path === "/hello").slice(-2);
    expect(a!.traceId).not.toBe(b!.traceId);
  });

  it("passes the trace on to every call: the same trace id, a new span id per call, tracestate as received", async () => {
    received.length = 0;
    const response = await app.request("/calls", { headers: { traceparent: VALID, tracestate: "vendor=abc,other=1" } });
    expect(response.status).toBe(200);
    const own = requestLine("/calls");
    expect(own.traceId).toBe(TRACE_ID);
    expect(received).toHaveLength(2);
    const parents = received.map((headers) => parseTraceparent(headers.traceparent as string));
    for (const parent of parents) expect(parent).toMatchObject({ traceId: TRACE_ID, sampled: true });
    const spanIds = new Set([PARENT_ID, own.spanId, ...parents.map((p) => p!.parentId)]);
    expect(spanIds.size).toBe(4);
    for (const headers of received) expect(headers.tracestate).toBe("vendor=abc,other=1");
  });

  it("keeps the caller's not-sampled flag, drops tracestate without a valid traceparent, and starts sampled traces", async () => {
    received.length = 0;
    await app.request("/calls", { headers: { traceparent: `00-${TRACE_ID}-${PARENT_ID}-00` } });
    await app.request("/calls", { headers: { traceparent: "bad", tracestate: "vendor=abc" } });
    expect(parseTraceparent(received[0]!.traceparent as string)?.sampled).toBe(false);
    const fresh = parseTraceparent(received[2]!.traceparent as string)!;
    expect(fresh.sampled).toBe(true);
    expect(fresh.traceId).toBe(requestLine("/calls").traceId);
    expect(received[2]!.tracestate).toBeUndefined();
  });

  it("an unmatched path is traced and logged too", async () => {
    const response = await app.request("/nowhere", { headers: { traceparent: VALID } });
    expect(response.status).toBe(404);
    expect(requestLine("/nowhere")).toMatchObject({ traceId: TRACE_ID, status: 404 });
  });
});

describe("when spans are exported", () => {
  it("as the OpenTelemetry SDK reads its environment: an OTLP endpoint, not disabled, the otlp exporter", () => {
    expect(exportsSpans({})).toBe(false);
    expect(exportsSpans({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318" })).toBe(true);
    expect(exportsSpans({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://collector:4318/v1/traces" })).toBe(true);
    expect(exportsSpans({ OTEL_EXPORTER_OTLP_ENDPOINT: " " })).toBe(false);
    expect(exportsSpans({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318", OTEL_SDK_DISABLED: "true" })).toBe(false);
    expect(exportsSpans({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318", OTEL_TRACES_EXPORTER: "none" })).toBe(false);
    expect(exportsSpans({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318", OTEL_TRACES_EXPORTER: "console,otlp" })).toBe(true);
  });

  it("without an endpoint, startTracing answers the ids-only tracing and exports nothing", async () => {
    expect(await startTracing("tracing-test", {})).toBe(idsOnlyTracing);
  });

  it("refuses OTLP over gRPC with a sentence, rather than sending JSON to a gRPC port", async () => {
    await expect(startTracing("tracing-test", { OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4317", OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" })).rejects.toMatchObject({
      name: "ConfigError",
      message: expect.stringContaining("OTEL_EXPORTER_OTLP_PROTOCOL=grpc is not supported"),
    });
  });
});

describe("Retry-After of another service's answer (RFC 9110 §10.2.3)", () => {
  const now = Date.parse("2026-11-27T08:00:00Z");
  it("takes delay-seconds and an HTTP-date, within 1 s and 300 s", () => {
    expect(retryAfterSeconds("17", now)).toBe(17);
    expect(retryAfterSeconds("0", now)).toBe(1);
    expect(retryAfterSeconds("86400", now)).toBe(300);
    expect(retryAfterSeconds("Fri, 27 Nov 2026 08:00:30 GMT", now)).toBe(30);
    expect(retryAfterSeconds("Fri, 27 Nov 2026 07:00:00 GMT", now)).toBe(1);
  });

  it("falls back to the default when there is none or it cannot be read", () => {
    for (const header of [null, "", "soon", "-5", "1.5"]) expect(retryAfterSeconds(header, now)).toBe(UPSTREAM_RETRY_AFTER_SECONDS);
  });
});
