import { Counter, Histogram, Registry, collectDefaultMetrics } from "prom-client";

/** Prometheus metrics of one service (`GET /metrics`), labelled by route pattern, never raw path. */
export class ServiceMetrics {
  readonly registry = new Registry();
  readonly requests: Counter<"method" | "route" | "status">;
  readonly duration: Histogram<"method" | "route">;

  constructor(service: string, { processMetrics = false } = {}) {
    this.registry.setDefaultLabels({ service });
    if (processMetrics) collectDefaultMetrics({ register: this.registry });
    this.requests = new Counter({
      name: "http_requests_total",
      help: "HTTP requests answered, by route pattern and status",
      labelNames: ["method", "route", "status"],
      registers: [this.registry],
    });
    this.duration = new Histogram({
      name: "http_request_duration_seconds",
      help: "HTTP request duration in seconds",
      labelNames: ["method", "route"],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers: [this.registry],
    });
  }

  private readonly counters = new Map<string, { inc(): void }>();
  private readonly timers = new Map<string, { observe(value: number): void }>();

  /**
   * Counts one answered request. The labelled children are kept per label set: prom-client would
   * otherwise hash the labels on every request, and this runs on every request of every service.
   */
  record(method: string, route: string, status: number, seconds: number): void {
    const counterKey = `${method} ${route} ${status}`;
    let counter = this.counters.get(counterKey);
    if (!counter) this.counters.set(counterKey, (counter = this.requests.labels({ method, route, status: String(status) })));
    counter.inc();
    const timerKey = `${method} ${route}`;
    let timer = this.timers.get(timerKey);
    if (!timer) this.timers.set(timerKey, (timer = this.duration.labels({ method, route })));
    timer.observe(seconds);
  }
}
