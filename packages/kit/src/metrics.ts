import { Registry, collectDefaultMetrics } from "prom-client";

const DURATION_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];

/** What one route pattern (under one method) has answered. */
interface RouteTally {
  /** answers by status code */
  statuses: Map<number, number>;
  /** answers by duration bucket (DURATION_BUCKETS, then one past the last bound), not cumulative */
  buckets: number[];
  seconds: number;
  count: number;
}

type Labels = Record<string, string | number>;
interface Sample {
  labels: Labels;
  value: number;
  metricName?: string;
}

/**
 * Prometheus metrics of one service (`GET /metrics`), labelled by route pattern, never raw path:
 * `http_requests_total` (method, route, status) and `http_request_duration_seconds` (method,
 * route). A request only adds to plain counters; the Prometheus samples are built when /metrics is
 * read. prom-client's own metrics hash and check their labels on every observation, which cost the
 * hot path several per cent of its time (ADR 0005); here they serve the format and the process
 * metrics.
 */
export class ServiceMetrics {
  readonly registry = new Registry();
  private readonly tallies = new Map<string, Map<string, RouteTally>>();

  constructor(service: string, { processMetrics = false } = {}) {
    this.registry.setDefaultLabels({ service });
    if (processMetrics) collectDefaultMetrics({ register: this.registry });
    this.register("http_requests_total", "HTTP requests answered, by route pattern and status", "counter", () => this.requestSamples());
    this.register("http_request_duration_seconds", "HTTP request duration in seconds", "histogram", () => this.durationSamples());
  }

  /** Counts one answered request. */
  record(method: string, route: string, status: number, seconds: number): void {
    let routes = this.tallies.get(method);
    if (!routes) this.tallies.set(method, (routes = new Map()));
    let tally = routes.get(route);
    if (!tally) routes.set(route, (tally = { statuses: new Map(), buckets: new Array<number>(DURATION_BUCKETS.length + 1).fill(0), seconds: 0, count: 0 }));
    tally.statuses.set(status, (tally.statuses.get(status) ?? 0) + 1);
    let bucket = 0;
    while (bucket < DURATION_BUCKETS.length && seconds > DURATION_BUCKETS[bucket]!) bucket++;
    tally.buckets[bucket]!++;
    tally.seconds += seconds;
    tally.count++;
  }

  private *eachTally(): Generator<[string, string, RouteTally]> {
    for (const [method, routes] of this.tallies) for (const [route, tally] of routes) yield [method, route, tally];
  }

  private requestSamples(): Sample[] {
    const samples: Sample[] = [];
    for (const [method, route, tally] of this.eachTally()) {
      for (const [status, value] of tally.statuses) samples.push({ labels: { method, route, status: String(status) }, value });
    }
    return samples;
  }

  private durationSamples(): Sample[] {
    const name = "http_request_duration_seconds";
    const samples: Sample[] = [];
    for (const [method, route, tally] of this.eachTally()) {
      let below = 0;
      DURATION_BUCKETS.forEach((le, i) => {
        below += tally.buckets[i]!;
        samples.push({ labels: { le, method, route }, value: below, metricName: `${name}_bucket` });
      });
      samples.push({ labels: { le: "+Inf", method, route }, value: tally.count, metricName: `${name}_bucket` });
      samples.push({ labels: { method, route }, value: tally.seconds, metricName: `${name}_sum` });
      samples.push({ labels: { method, route }, value: tally.count, metricName: `${name}_count` });
    }
    return samples;
  }

  /**
   * Adds a metric whose samples are built when read, in the shape prom-client's registry reads
   * from its own metrics (`get()`), so default labels and both exposition formats apply to it.
   */
  private register(name: string, help: string, type: "counter" | "histogram", samples: () => Sample[]): void {
    const metric = {
      name,
      help,
      type,
      aggregator: "sum",
      get: async () => ({ name, help, type, aggregator: "sum", values: samples() }),
      reset: () => this.tallies.clear(),
    };
    this.registry.registerMetric(metric as unknown as Parameters<Registry["registerMetric"]>[0]);
  }
}
