import { randomFillSync } from "node:crypto";
import type { Context } from "hono";
import { ConfigError } from "./config.js";

/**
 * W3C Trace Context (DESIGN §10, https://www.w3.org/TR/trace-context/): a request continues the
 * caller's trace when its `traceparent` is valid, else starts one; every call to another service
 * carries the trace on with a span id of its own; each request's log line names its trace and span.
 * With `OTEL_EXPORTER_OTLP_ENDPOINT` set, the spans also go out over OTLP through the OpenTelemetry
 * SDK (./otlp.ts), which is loaded only then (ADR 0020).
 *
 * The request's trace is kept in Hono's context and handed to the clients that call other services,
 * not in an AsyncLocalStorage: on Node 20 one AsyncLocalStorage turns on promise hooks for every
 * promise of the process, a cost the resource services' hot path does not pay today (ADR 0005).
 */

/** What a valid `traceparent` says (W3C Trace Context §3.2). */
export interface TraceParent {
  traceId: string;
  /** the caller's span */
  parentId: string;
  sampled: boolean;
}

/** The headers that carry a trace to another service. */
export interface TraceHeaders {
  traceparent: string;
  tracestate?: string;
}

/** A call to another service: the headers to send, and its end (the answer's status, or the error it failed with). */
export interface OutgoingCall {
  readonly headers: TraceHeaders;
  end(outcome: number | unknown): void;
}

/**
 * Where a call to another service belongs: a request's trace (the call is a child of its span), or a
 * service's tracing itself, for work no request started (each call begins a trace of its own).
 */
export interface TraceSource {
  call(method: string, url: string): OutgoingCall;
}

/** A request's span in its trace, as this service serves it. */
export interface RequestTrace extends TraceSource {
  readonly traceId: string;
  readonly spanId: string;
  /**
   * the request answered: the exported span takes its route pattern (its name), its status and its
   * path as it may be logged (./redaction.ts: no credential, no query string)
   */
  end(route: string | undefined, status: number, loggablePath: string): void;
}

/** How one service takes part in traces. */
export interface Tracing extends TraceSource {
  /** the span of a request: the caller's trace continued when `traceparent` is valid, else a new trace */
  serve(method: string, traceparent: string | undefined, tracestate: string | undefined): RequestTrace;
  /** sends the spans still buffered, and stops exporting */
  shutdown(): Promise<void>;
}

// version 00 is exactly these four fields; a later version may add fields after a dash (§3.2.4)
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;
const ZERO_TRACE_ID = "0".repeat(32);
const ZERO_SPAN_ID = "0".repeat(16);

/**
 * A `traceparent` header, or null when it is absent or invalid (§3.2.2): lowercase hex only, ids not
 * all zero, version ff refused; a version above 00 is read as 00 when its first four fields have 00's
 * layout (§3.2.4: "try to parse it"), and version 00 with anything after its flags is invalid.
 */
export function parseTraceparent(header: string | undefined): TraceParent | null {
  if (header === undefined || header.length < 55 || header.length > 512) return null;
  const match = TRACEPARENT.exec(header);
  if (!match) return null;
  const [, version, traceId, parentId, flags, rest] = match as unknown as [string, string, string, string, string, string | undefined];
  if (version === "ff" || (version === "00" && rest !== undefined)) return null;
  if (traceId === ZERO_TRACE_ID || parentId === ZERO_SPAN_ID) return null;
  return { traceId, parentId, sampled: (parseInt(flags, 16) & 1) === 1 };
}

const TRACESTATE = /^[\x20-\x7e]*$/;

/**
 * `tracestate` as it is passed on: vendors' entries this service does not read, kept as received
 * (§3.3); dropped when longer than the 512 characters §3.3.1.5 asks every vendor to carry, or not
 * printable ASCII, rather than cut in the middle of an entry.
 */
export function passableTracestate(header: string | undefined): string | undefined {
  if (!header || header.length > 512 || !TRACESTATE.test(header)) return undefined;
  return header;
}

// ids come from a pool of random bytes refilled at once: one call into the CSPRNG per 170 requests
const pool = Buffer.allocUnsafe(4096);
let used = pool.length;
function randomHex(bytes: 8 | 16, zero: string): string {
  for (;;) {
    if (used + bytes > pool.length) {
      randomFillSync(pool);
      used = 0;
    }
    const hex = pool.toString("hex", used, (used += bytes));
    if (hex !== zero) return hex;
  }
}
export const newTraceId = (): string => randomHex(16, ZERO_TRACE_ID);
export const newSpanId = (): string => randomHex(8, ZERO_SPAN_ID);

export const traceparentOf = (traceId: string, spanId: string, sampled: boolean): string => `00-${traceId}-${spanId}-${sampled ? "01" : "00"}`;

const ignore = () => {};

/** A trace as a service that exports nothing takes part in it: ids and headers only. */
class IdsOnlyTrace implements RequestTrace {
  constructor(
    readonly traceId: string,
    readonly spanId: string,
    private readonly sampled: boolean,
    private readonly state: string | undefined,
  ) {}

  call(): OutgoingCall {
    const traceparent = traceparentOf(this.traceId, newSpanId(), this.sampled);
    return { headers: this.state ? { traceparent, tracestate: this.state } : { traceparent }, end: ignore };
  }

  end(): void {}
}

/**
 * Tracing without export. A new trace is marked sampled: this service records it in its log lines,
 * and a service after it that exports keeps its part (the SDK's default sampler follows the caller).
 */
export const idsOnlyTracing: Tracing = {
  serve(_method, traceparent, tracestate) {
    const parent = parseTraceparent(traceparent);
    if (!parent) return new IdsOnlyTrace(newTraceId(), newSpanId(), true, undefined);
    return new IdsOnlyTrace(parent.traceId, newSpanId(), parent.sampled, passableTracestate(tracestate));
  },
  call: () => ({ headers: { traceparent: traceparentOf(newTraceId(), newSpanId(), true) }, end: ignore }),
  shutdown: async () => {},
};

/** The services of this process that export their spans (several services may share a process). */
const exporting = new Map<string, Tracing>();

/** The tracing of `service`: the exporting one once startTracing has started it, else ids only. */
export function tracingFor(service: string): Tracing {
  return exporting.get(service) ?? idsOnlyTracing;
}

/** Whether the environment asks for spans to be exported, as the OpenTelemetry SDK reads it. */
export function exportsSpans(env: NodeJS.ProcessEnv): boolean {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === "true") return false;
  const exporters = env.OTEL_TRACES_EXPORTER?.trim().toLowerCase();
  if (exporters && !exporters.split(",").some((name) => name.trim() === "otlp")) return false;
  return Boolean(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim() || env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim());
}

/**
 * Starts exporting `service`'s spans when the environment asks for it (`OTEL_EXPORTER_OTLP_ENDPOINT`
 * or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`); the SDK is loaded then, and only then. Call it before
 * the service's app is made: `createServiceApp` takes the service's tracing from here. The answer's
 * `shutdown` flushes what is buffered and stops the export.
 */
export async function startTracing(service: string, env: NodeJS.ProcessEnv = process.env): Promise<Tracing> {
  if (!exportsSpans(env)) return idsOnlyTracing;
  const protocol = (env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? env.OTEL_EXPORTER_OTLP_PROTOCOL)?.trim();
  if (protocol === "grpc") {
    throw new ConfigError("OTEL_EXPORTER_OTLP_PROTOCOL=grpc is not supported: spans go out as OTLP over HTTP (JSON); point OTEL_EXPORTER_OTLP_ENDPOINT at the collector's HTTP port (4318)");
  }
  const { otlpTracing } = await import("./otlp.js");
  const tracing = otlpTracing(service, await loadOtlpModules(), env);
  exporting.set(service, tracing);
  return {
    serve: tracing.serve.bind(tracing),
    call: tracing.call.bind(tracing),
    shutdown: async () => {
      if (exporting.get(service) === tracing) exporting.delete(service);
      await tracing.shutdown();
    },
  };
}

/** The SDK's packages, imported only when spans are exported (start-up time, ADR 0016). */
async function loadOtlpModules() {
  const [api, sdk, resources, exporter] = await Promise.all([
    import("@opentelemetry/api"),
    import("@opentelemetry/sdk-trace"),
    import("@opentelemetry/resources"),
    import("@opentelemetry/exporter-trace-otlp-http"),
  ]);
  return { api, sdk, resources, exporter };
}
export type OtlpModules = Awaited<ReturnType<typeof loadOtlpModules>>;

/** This request's trace (the kit sets it as the request arrives). */
export function traceOf(c: Context): RequestTrace {
  return (c.get("trace" as never) as RequestTrace | undefined) ?? idsOnlyTracing.serve(c.req.method, undefined, undefined);
}

/**
 * `doFetch(url, init)` as a call to another service from `from`: `traceparent` (the same trace, a
 * span id of its own) and `tracestate` go along, and an exporting service records a client span
 * ended by the answer's status or the failure. Only for our own services: an address a tenant gave
 * (a webhook) is not sent our trace ids (ADR 0020).
 */
export async function fetchTraced(from: TraceSource, doFetch: typeof fetch, url: string, init: RequestInit = {}): Promise<Response> {
  const call = from.call(init.method ?? "GET", url);
  const headers = new Headers(init.headers);
  headers.set("traceparent", call.headers.traceparent);
  if (call.headers.tracestate) headers.set("tracestate", call.headers.tracestate);
  try {
    const response = await doFetch(url, { ...init, headers });
    call.end(response.status);
    return response;
  } catch (err) {
    call.end(err);
    throw err;
  }
}
