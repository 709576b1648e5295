import type { Context as OtelContext, Span } from "@opentelemetry/api";
import type { Sampler } from "@opentelemetry/sdk-trace";
import { loggableUrl, redactText } from "./redaction.js";
import { parseTraceparent, passableTracestate, traceparentOf, type OutgoingCall, type OtlpModules, type RequestTrace, type Tracing } from "./tracing.js";

/**
 * Tracing that exports spans over OTLP/HTTP (JSON) with the OpenTelemetry SDK: a server span per
 * request, a client span per call to another service, `service.name` the service's id. The SDK's
 * packages arrive as `modules`, imported by startTracing only when export is asked for.
 *
 * The environment is read as the SDK's own configuration reads it: the exporter takes
 * `OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT`, `_HEADERS`, `_TIMEOUT` and `_COMPRESSION`; the resource
 * `OTEL_SERVICE_NAME` (it wins over the service's id) and `OTEL_RESOURCE_ATTRIBUTES`; the sampler
 * `OTEL_TRACES_SAMPLER` and `OTEL_TRACES_SAMPLER_ARG`; the batch processor `OTEL_BSP_*`.
 *
 * No context manager is registered: each span is given its parent explicitly, so the SDK needs no
 * AsyncLocalStorage either (see ./tracing.ts).
 */
export function otlpTracing(service: string, { api, sdk, resources, exporter }: OtlpModules, env: NodeJS.ProcessEnv = process.env): Tracing {
  const { SpanKind, SpanStatusCode, ROOT_CONTEXT, TraceFlags, trace } = api;
  const resource = resources
    .defaultResource()
    .merge(resources.resourceFromAttributes({ "service.name": service }))
    .merge(resources.detectResources({ detectors: [resources.envDetector] }));
  const provider = new sdk.TracerProvider({
    resource,
    sampler: samplerFrom(env, sdk),
    spanProcessors: [
      new sdk.BatchSpanProcessor({
        exporter: new exporter.OTLPTraceExporter(),
        scheduledDelayMillis: numberFrom(env.OTEL_BSP_SCHEDULE_DELAY),
        exportTimeoutMillis: numberFrom(env.OTEL_BSP_EXPORT_TIMEOUT),
        maxQueueSize: numberFrom(env.OTEL_BSP_MAX_QUEUE_SIZE),
        maxExportBatchSize: numberFrom(env.OTEL_BSP_MAX_EXPORT_BATCH_SIZE),
      }),
    ],
  });
  const tracer = provider.getTracer("@core/kit");

  /** A client span under `parent` (the root context: a new trace), with the headers that carry it. */
  const call = (parent: OtelContext, method: string, url: string): OutgoingCall => {
    const target = new URL(url);
    const span = tracer.startSpan(
      method,
      {
        kind: SpanKind.CLIENT,
        attributes: {
          "http.request.method": method,
          "server.address": target.hostname,
          "server.port": Number(target.port) || (target.protocol === "https:" ? 443 : 80),
          // a span is a log: no query, no credential in the path (./redaction.ts)
          "url.full": loggableUrl(target),
        },
      },
      parent,
    );
    const context = span.spanContext();
    const state = context.traceState?.serialize();
    const traceparent = traceparentOf(context.traceId, context.spanId, (context.traceFlags & TraceFlags.SAMPLED) === TraceFlags.SAMPLED);
    return {
      headers: state ? { traceparent, tracestate: state } : { traceparent },
      end(outcome) {
        if (typeof outcome === "number") {
          span.setAttribute("http.response.status_code", outcome);
          // an HTTP client's span fails on 4xx and 5xx (OpenTelemetry's HTTP semantic conventions)
          if (outcome >= 400) span.setStatus({ code: SpanStatusCode.ERROR });
        } else {
          span.setAttribute("error.type", (outcome as Error | undefined)?.name ?? "Error");
          span.setStatus({ code: SpanStatusCode.ERROR, message: redactText(String((outcome as Error | undefined)?.message ?? "")) });
        }
        span.end();
      },
    };
  };

  class ExportedTrace implements RequestTrace {
    readonly traceId: string;
    readonly spanId: string;
    constructor(
      private readonly span: Span,
      private readonly method: string,
    ) {
      ({ traceId: this.traceId, spanId: this.spanId } = span.spanContext());
    }

    call(method: string, url: string): OutgoingCall {
      return call(trace.setSpan(ROOT_CONTEXT, this.span), method, url);
    }

    end(route: string | undefined, status: number, loggablePath: string): void {
      this.span.setAttribute("url.path", loggablePath);
      if (route) {
        this.span.updateName(`${this.method} ${route}`);
        this.span.setAttribute("http.route", route);
      }
      this.span.setAttribute("http.response.status_code", status);
      // a server's span fails on 5xx only: a 4xx is the client's mistake
      if (status >= 500) this.span.setStatus({ code: SpanStatusCode.ERROR });
      this.span.end();
    }
  }

  return {
    serve(method, traceparent, tracestate) {
      const parent = parseTraceparent(traceparent);
      const state = parent ? passableTracestate(tracestate) : undefined;
      const context = parent
        ? trace.setSpanContext(ROOT_CONTEXT, {
            traceId: parent.traceId,
            spanId: parent.parentId,
            traceFlags: parent.sampled ? TraceFlags.SAMPLED : TraceFlags.NONE,
            isRemote: true,
            ...(state ? { traceState: api.createTraceState(state) } : {}),
          })
        : ROOT_CONTEXT;
      const span = tracer.startSpan(method, { kind: SpanKind.SERVER, attributes: { "http.request.method": method } }, context);
      return new ExportedTrace(span, method);
    },
    call: (method, url) => call(ROOT_CONTEXT, method, url),
    shutdown: () => provider.shutdown(),
  };
}

const numberFrom = (value: string | undefined): number | undefined => {
  const number = value?.trim() ? Number(value) : NaN;
  return Number.isFinite(number) && number >= 0 ? number : undefined;
};

/** `OTEL_TRACES_SAMPLER` (default `parentbased_always_on`) and `OTEL_TRACES_SAMPLER_ARG`, as the SDK names them. */
function samplerFrom(env: NodeJS.ProcessEnv, sdk: OtlpModules["sdk"]): Sampler {
  const name = env.OTEL_TRACES_SAMPLER?.trim().toLowerCase() || "parentbased_always_on";
  const argument = numberFrom(env.OTEL_TRACES_SAMPLER_ARG);
  const ratio = () => new sdk.TraceIdRatioBasedSampler(argument !== undefined && argument <= 1 ? argument : 1);
  const parentBased = (root: Sampler) => new sdk.ParentBasedSampler({ root });
  switch (name) {
    case "always_on":
      return new sdk.AlwaysOnSampler();
    case "always_off":
      return new sdk.AlwaysOffSampler();
    case "traceidratio":
      return ratio();
    case "parentbased_always_off":
      return parentBased(new sdk.AlwaysOffSampler());
    case "parentbased_traceidratio":
      return parentBased(ratio());
    default:
      return parentBased(new sdk.AlwaysOnSampler());
  }
}
