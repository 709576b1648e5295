import { OpenAPIHono, z } from "@hono/zod-openapi";
import type { Context, Handler, MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import { HTTPException } from "hono/http-exception";
import { matchedRoutes } from "hono/route";
import type { RouterRoute } from "hono/types";
import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { ApiError, envelope, isUnreachable, upstreamUnavailable, validationError } from "./errors.js";
import type { Logger } from "./logger.js";
import { loggablePath, SecretRoutes } from "./redaction.js";
import { ServiceMetrics, withinTime } from "./metrics.js";
import { renderApiReference } from "./api-reference.js";
import { ErrorEnvelopeSchema, jsonContent, withKitStatuses } from "./openapi.js";
import { screenFormBody, screenJsonBody, screenPathAndQuery } from "./input-screen.js";
import { isKitRoute, KitRouter } from "./router.js";
import { isJsonMediaType, mediaTypeOf } from "./media-type.js";
import { tracingFor, type RequestTrace, type Tracing } from "./tracing.js";

export interface KitVariables {
  requestId: string;
  /** the request's span in its W3C trace (./tracing.ts) */
  trace: RequestTrace;
  /** the service's secret path parameters, for loggablePathOf */
  secretRoutes: SecretRoutes;
}

export type KitEnv = { Variables: KitVariables };

export interface HealthCheck {
  name: string;
  /** resolves when the dependency answers; throws when it does not */
  check(): Promise<void>;
}

export interface ServiceAppOptions {
  service: string;
  title: string;
  version?: string;
  description?: string;
  logger: Logger;
  metrics?: ServiceMetrics;
  /** how requests take part in traces; default the service's (tracingFor: exporting once startTracing started it) */
  tracing?: Tracing;
  healthChecks?: HealthCheck[];
  /**
   * what `/health/ready` checks (DESIGN §10): the database answers with the service's migrations
   * applied and, for a resource service, IAM's keys are known; none: ready while it runs
   */
  readinessChecks?: HealthCheck[];
  /** request bodies above this many bytes are refused with 413 (DESIGN §3: 1 MiB) */
  maxBodyBytes?: number;
  /** paths whose bodies are not ours to check (the auth library, OAuth form posts) */
  ownsBody?: (path: string) => boolean;
  /**
   * paths whose error bodies carry no `details` (spec §2.3: IAM whoami, billing upgrade), whatever
   * refuses the request: the route, or the kit before any route runs (413, 415, 400)
   */
  omitsErrorDetails?: (path: string) => boolean;
  /** adds to the description what the routes cannot declare themselves (a library's own routes) */
  extendDescription?: (document: OpenApiDocument) => Promise<void> | void;
  /**
   * who may call, settled for every request after its input is screened and before any route (IAM's
   * route guards): returns nothing when it settled at once, else a promise to wait for; throws or
   * rejects to refuse. It runs inside the kit's one middleware, a layer fewer per request (ADR 0005).
   */
  guard?: (c: Context) => Promise<unknown> | undefined;
  /**
   * the path parameters that are secrets, by route pattern: `{ "/portal/:id": ["id"] }`. A pattern
   * covers its route and every route below it; a request line, a span and loggablePathOf show such a
   * parameter as `[redacted]` (./redaction.ts, docs/vault/implementation/service-kit.md). Credentials
   * with a shape of their own (`core_…`, `bps_…`, JWTs) are redacted without a declaration.
   */
  secretPathParameters?: Record<string, readonly string[]>;
}

/** Whether a request path is `prefix` or below it (`/platforms`, `/platforms/p1`, not `/platformsx`): a guard's scope. */
export const isUnder = (path: string, prefix: string): boolean => path === prefix || path.startsWith(`${prefix}/`);

export type OpenApiDocument = ReturnType<OpenAPIHono["getOpenAPI31Document"]>;

const SANE_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** The id of a request: the caller's `x-request-id` when it is sane, else a new one. */
const requestIdFor = (incoming: string | undefined) => (incoming && SANE_REQUEST_ID.test(incoming) ? incoming : randomUUID());
/** how long `/health` and `/health/ready` wait for one check */
const HEALTH_CHECK_TIMEOUT_MS = 2_000;
/** what a 503 of `/health/ready` asks a caller to wait */
const READY_RETRY_AFTER_SECONDS = 5;
const FORM_MEDIA = /^(application\/x-www-form-urlencoded|multipart\/form-data)$/i;

/** The health answer of spec §2.4. */
const HealthSchema = z
  .object({
    status: z.enum(["healthy", "degraded"]),
    checks: z.record(z.string(), z.object({ status: z.enum(["ok", "fail"]), latencyMs: z.number().int(), error: z.string().optional() })),
  })
  .openapi("Health");

/**
 * A request's path (or `path`, another path it stands for) as it may be logged or put in a span:
 * credentials by their shape and the secret path parameters the service declared for the route that
 * answers it, redacted (./redaction.ts). Every log line that names a path takes it from here.
 */
export function loggablePathOf(c: Context, path: string = c.req.path): string {
  const secrets = (c.get("secretRoutes" as never) as SecretRoutes | undefined) ?? SecretRoutes.none;
  return loggablePath(path, secrets, path === c.req.path ? answeringRoute(c)?.path : undefined);
}

/**
 * The route that answers the request: hono moves `routeIndex` along the chain it runs, so of two
 * routes a path matches (`/portal/open` and `/portal/:id`) it names the one that answered. When the
 * kit answered before any route ran (a refusal), the route the request was headed for.
 */
function answeringRoute(c: Context): RouterRoute | undefined {
  const routes = matchedRoutes(c);
  const answering = routes[c.req.routeIndex];
  return answering && !isKitRoute(answering) ? answering : routes.at(-1);
}

export function requestIdOf(c: Context): string {
  return (c.get("requestId" as never) as string | undefined) ?? "unknown";
}

/** The one way to answer an error: the envelope of spec §2.3 with the request id. */
export function errorResponse(c: Context, err: ApiError): Response {
  const body = envelope(err.code, err.message, requestIdOf(c), err.details, !omitsDetails(c));
  return c.json(body, err.status, err.headers);
}

/** A Response made elsewhere (a library's handler), with this request's id added. */
export function withRequestId(c: Context, response: Response): Response {
  const copy = new Response(response.body, response);
  copy.headers.set("x-request-id", requestIdOf(c));
  return copy;
}

const omitsDetails = (c: Context) => c.get("omitErrorDetails" as never) === true;

/**
 * A service's Hono app with everything DESIGN §3 asks of every service: request ids, request logs,
 * metrics, body limits, the error envelope for validation failures, malformed JSON and unknown
 * routes, `/health`, `/metrics`, `/openapi.json` and `/docs`.
 */
export function createServiceApp(options: ServiceAppOptions) {
  const { service, logger } = options;
  const metrics = options.metrics ?? new ServiceMetrics(service);
  const maxBodyBytes = options.maxBodyBytes ?? 1024 * 1024;
  const ownsBody = options.ownsBody ?? (() => false);
  const tracing = options.tracing ?? tracingFor(service);
  const secretRoutes = new SecretRoutes(options.secretPathParameters ?? {});

  const tooLarge = () => new ApiError(413, "PAYLOAD_TOO_LARGE", `Request body exceeds ${maxBodyBytes} bytes`);
  const streamingLimit = bodyLimit({
    maxSize: maxBodyBytes,
    onError: () => {
      throw tooLarge();
    },
  });
  const guard = options.guard;

  /** The checks every request passes before its route: input screen, then the service's guard. */
  const admit = (c: Context, next: () => unknown): unknown => {
    screenPathAndQuery(c);
    const guarded = guard
      ? () => {
          const pending = guard(c);
          return pending ? pending.then(next) : next();
        }
      : next;
    const length = c.req.header("content-length");
    if (!hasBody(c, length)) return guarded();
    // a declared length is checked without touching the body; hono's limiter wraps the stream,
    // which costs a full Request per call, so it only guards bodies of unknown length
    if (length !== undefined && Number(length) > maxBodyBytes) throw tooLarge();
    const type = c.req.header("content-type");
    const json = isJsonMediaType(type);
    if (!json && !ownsBody(c.req.path)) {
      throw new ApiError(415, "UNSUPPORTED_MEDIA_TYPE", "Request bodies must be JSON (Content-Type: application/json)");
    }
    // every body a route or library will read is screened first (DESIGN §3: bad input loses nothing)
    const screen = json ? screenJsonBody : FORM_MEDIA.test(mediaTypeOf(type)) ? screenFormBody : null;
    const screened = screen ? () => screen(c).then(guarded) : guarded;
    return length === undefined ? (streamingLimit(c, screened as () => Promise<void>) as Promise<unknown>) : screened();
  };

  /** What the kit does as a request arrives: the error-detail rule, the request id and its trace. */
  const begin = (c: Context): string => {
    if (options.omitsErrorDetails?.(c.req.path)) c.set("omitErrorDetails" as never, true as never);
    const id = requestIdFor(c.req.header("x-request-id"));
    c.set("requestId", id);
    c.set("secretRoutes", secretRoutes);
    // W3C Trace Context §3.3: tracestate means nothing without a traceparent
    const traceparent = c.req.header("traceparent");
    c.set("trace", tracing.serve(c.req.method, traceparent, traceparent === undefined ? undefined : c.req.header("tracestate")));
    // set before the handler, on Node's response when there is one: every answer carries it, and
    // the route's Response keeps its plain headers (a web Headers object per request costs on the
    // hot path). In-process requests (tests) have no Node response; a handler returning a foreign
    // Response there passes it through withRequestId()
    const outgoing = nodeOf(c)?.outgoing;
    if (outgoing) outgoing.setHeader("x-request-id", id);
    else c.header("x-request-id", id);
    return id;
  };

  /**
   * A request through the kit: its id, the screen and the guard, then `inner` (the route). What it
   * answered is counted and logged, and anything thrown on the way is answered in the envelope, so
   * a refusal is counted and logged too. Plain rather than async, as each async step is a promise
   * (ADR 0005): when nothing had to wait, the answer is there at once.
   */
  const serve = (c: Context, inner: () => unknown, answer: () => Response | undefined) => {
    const id = begin(c);
    const started = performance.now();
    const done = () => {
      const response = answer();
      record(c, id, started, response?.status ?? 404);
      return response;
    };
    const failed = (err: unknown) => {
      const response = (c.res = handleError(err, c));
      record(c, id, started, response.status);
      return response;
    };
    let admitted: unknown;
    try {
      admitted = admit(c, inner);
    } catch (err) {
      return failed(err);
    }
    return admitted instanceof Promise ? admitted.then(done, failed) : done();
  };

  // The kit's work comes first on every request, put there by the app's router (./router.ts). A route with
  // one handler runs inside it, as one handler, so hono calls it without composing a chain; what the
  // route throws is answered by the same error handler hono would use.
  const withKit =
    (handler: Handler): Handler =>
    (c, next) => {
      let response: Response | undefined;
      const run = () => {
        const answer = handler(c, next) as Response | undefined | Promise<Response | undefined>;
        if (answer instanceof Promise) return answer.then((settled) => void (response = settled));
        response = answer;
        return undefined;
      };
      return serve(c, run, () => response ?? (c.finalized ? c.res : undefined));
    };
  // Any other request (validators before the route, or no route at all) gets it as a middleware,
  // ahead of hono's compose; what the route throws, hono hands to the error handler below.
  const kitMiddleware: MiddlewareHandler = (c, next) => {
    const served = serve(c, next, () => c.res);
    return served instanceof Promise ? served : Promise.resolve(served);
  };

  const app = new OpenAPIHono<KitEnv>({
    router: new KitRouter(kitMiddleware, withKit),
    defaultHook: (result) => {
      if (!result.success) throw validationError(result.error as z.ZodError, result.target === "json" ? "body" : result.target);
    },
  });

  // labelled by the pattern of the route that answered, or that the request was headed for when it
  // was refused before the route ran (the kit's own entry is last only when nothing matched)
  const record = (c: Context, id: string, started: number, status: number) => {
    const route = answeringRoute(c);
    const label = route && route.handler !== kitMiddleware && status !== 404 ? route.path : "(unmatched)";
    const trace = c.get("trace" as never) as RequestTrace;
    // the path only (query strings carry tokens), with its credentials redacted
    const path = loggablePathOf(c);
    trace.end(label === "(unmatched)" ? undefined : label, status, path);
    count(c.req.method, label, path, status, id, started, trace);
  };

  const count = (method: string, route: string, path: string, status: number, id: string, started: number, trace: RequestTrace) => {
    const seconds = (performance.now() - started) / 1000;
    metrics.record(method, route, status, seconds);
    logger.info({ requestId: id, traceId: trace.traceId, spanId: trace.spanId, method, path, status, ms: Math.round(seconds * 10000) / 10 }, "request");
  };

  function handleError(err: unknown, c: Context): Response {
    if (err instanceof ApiError) return errorResponse(c, err);
    if (err instanceof HTTPException) {
      // hono's own refusals: malformed JSON or form bodies
      const code = err.status === 400 ? "BAD_REQUEST" : err.status === 413 ? "PAYLOAD_TOO_LARGE" : "BAD_REQUEST";
      return errorResponse(c, new ApiError(err.status as 400, code, err.message || "Bad request"));
    }
    // the database (or another dependency) out of reach is an outage to wait out, not a bug: 503, retryable
    const unreachable = isUnreachable(err);
    if (unreachable) {
      logger.warn({ requestId: requestIdOf(c), err: loggableError(err) }, "a dependency is unreachable");
      const message = unreachable === "database" ? "The database is unavailable; try again shortly" : "A service this request depends on is unreachable; try again shortly";
      return errorResponse(c, upstreamUnavailable(message, 5));
    }
    logger.error({ requestId: requestIdOf(c), err: loggableError(err) }, "unhandled error");
    return errorResponse(c, new ApiError(500, "INTERNAL", "Internal error"));
  }
  app.onError(handleError);

  app.notFound((c) => errorResponse(c, new ApiError(404, "NOT_FOUND", `No route for ${c.req.method} ${c.req.path}`)));

  const health = async (c: Context, checks: HealthCheck[], retryAfter?: string) => {
    const answers: Record<string, { status: "ok" | "fail"; latencyMs: number; error?: string }> = {};
    await Promise.all(
      checks.map(async (h) => {
        const started = performance.now();
        try {
          await withinTime(h.check(), HEALTH_CHECK_TIMEOUT_MS);
          answers[h.name] = { status: "ok", latencyMs: Math.round(performance.now() - started) };
        } catch (e) {
          // the driver's own words, not drizzle's wrapper (its statement and parameters)
          const { message, cause } = loggableError(e);
          answers[h.name] = { status: "fail", latencyMs: Math.round(performance.now() - started), error: cause ?? message };
        }
      }),
    );
    const healthy = Object.values(answers).every((x) => x.status === "ok");
    return c.json({ status: healthy ? "healthy" : "degraded", checks: answers }, healthy ? 200 : 503, healthy || !retryAfter ? undefined : { "retry-after": retryAfter });
  };
  app.get("/health", (c) => health(c, options.healthChecks ?? []));
  // DESIGN §10: a balancer sends requests to a replica whose readiness answers 200, and a supervisor
  // restarts one whose liveness does not; liveness touches nothing, so an outage restarts nobody
  app.get("/health/live", (c) => c.json({ status: "live" as const }, 200));
  app.get("/health/ready", (c) => health(c, options.readinessChecks ?? [], String(READY_RETRY_AFTER_SECONDS)));

  app.get("/metrics", async (c) => {
    c.header("content-type", metrics.registry.contentType);
    return c.body(await metrics.registry.metrics());
  });

  app.openAPIRegistry.registerPath({
    method: "get",
    path: "/health",
    summary: "Health of the service and of what it depends on (spec §2.4)",
    tags: ["operations"],
    responses: {
      200: jsonContent(HealthSchema, "Every check passed: healthy"),
      503: jsonContent(HealthSchema, "A check failed: degraded, with the failing check's error"),
    },
  });
  app.openAPIRegistry.registerPath({
    method: "get",
    path: "/health/live",
    summary: "Liveness: 200 while the process runs; it checks nothing else (DESIGN §10)",
    tags: ["operations"],
    responses: { 200: jsonContent(z.object({ status: z.literal("live") }).openapi("Liveness"), "The process runs") },
  });
  app.openAPIRegistry.registerPath({
    method: "get",
    path: "/health/ready",
    summary: "Readiness: 200 when this replica can serve (its database answers with its migrations applied; a resource service knows IAM's keys), else 503 (DESIGN §10)",
    tags: ["operations"],
    responses: {
      200: jsonContent(HealthSchema, "Ready: every readiness check passed"),
      503: {
        ...jsonContent(HealthSchema, "Not ready: a check failed, with its error; try again after Retry-After"),
        headers: { "Retry-After": { description: "seconds to wait before asking again", schema: { type: "integer" } } },
      },
    },
  });
  app.openAPIRegistry.registerPath({
    method: "get",
    path: "/metrics",
    summary: "Metrics in the Prometheus text format: requests, the process, the database pool, workers and the service's own (docs/vault/cross-cutting/observability.md)",
    tags: ["operations"],
    responses: { 200: { description: "Prometheus text exposition format", content: { "text/plain": { schema: z.string() } } } },
  });

  const documentConfig = {
    openapi: "3.1.0",
    info: { title: options.title, version: options.version ?? "1.0.0", description: options.description },
  };
  // the kit answers errors on every route (withKitStatuses), so the envelope is always described
  app.openAPIRegistry.register("ErrorEnvelope", ErrorEnvelopeSchema);
  app.openAPIRegistry.registerComponent("securitySchemes", "bearer", { type: "http", scheme: "bearer" });
  app.openAPIRegistry.registerComponent("securitySchemes", "apiKey", { type: "apiKey", in: "header", name: "x-api-key" });
  app.openAPIRegistry.registerComponent("securitySchemes", "sessionCookie", { type: "apiKey", in: "cookie", name: "better-auth.session_token" });
  app.openAPIRegistry.registerComponent("securitySchemes", "basic", { type: "http", scheme: "basic" });
  const openApiDocument = async (): Promise<OpenApiDocument> => {
    const document = app.getOpenAPI31Document(documentConfig);
    await options.extendDescription?.(document);
    return withKitStatuses(document);
  };
  app.get("/openapi.json", async (c) => c.json(await openApiDocument()));
  app.get("/docs", async (c) => c.html(renderApiReference((await openApiDocument()) as never)));

  return Object.assign(app, { metrics, openApiDocument, omitsErrorDetails: options.omitsErrorDetails });
}

export type ServiceApp = ReturnType<typeof createServiceApp>;

/**
 * An error as it may be logged: drizzle's query errors carry the query's parameters (tokens,
 * emails) in their message, so only the statement and the driver's own message are kept.
 */
export function loggableError(err: unknown): { name: string; message: string; stack?: string; cause?: string } {
  const e = err as Error & { cause?: unknown };
  const withoutParams = (text: string) => text.replace(/\nparams:[\s\S]*$/, "");
  const cause = e?.cause instanceof Error ? withoutParams(e.cause.message) : undefined;
  const message = withoutParams(String(e?.message ?? err));
  return { name: e?.name ?? "Error", message, stack: e?.stack ? withoutParams(e.stack.split("\n    at ")[0]!) + e.stack.slice(e.stack.indexOf("\n    at ")) : undefined, cause };
}

type NodeBindings = { incoming: IncomingMessage; outgoing: ServerResponse };

/** Node's request and response under @hono/node-server (`c.env`); none for in-process requests. */
function nodeOf(c: Context): NodeBindings | undefined {
  const env = c.env as Partial<NodeBindings> | undefined;
  return env?.incoming && env.outgoing ? (env as NodeBindings) : undefined;
}

/** Whether the request carries a body a route could read; GET, HEAD and OPTIONS bodies are never read. */
function hasBody(c: Context, length: string | undefined): boolean {
  if (c.req.method === "GET" || c.req.method === "HEAD" || c.req.method === "OPTIONS") return false;
  if (length !== undefined) return Number(length) > 0;
  // over HTTP/1.1 a request without Content-Length has a body only when it is chunked
  // (RFC 9112 §6.3); in-process requests (tests) carry no such headers, so ask the Request
  if (nodeOf(c)) return c.req.header("transfer-encoding") !== undefined;
  return c.req.raw.body !== null;
}
