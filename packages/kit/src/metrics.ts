import { Counter, Histogram, Registry, collectDefaultMetrics } from "prom-client";

const DURATION_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];
/** a worker's pass: from a few milliseconds (nothing due) to minutes (a provider that hangs) */
const PASS_BUCKETS = [0.005, 0.025, 0.1, 0.5, 1, 2.5, 10, 30, 120, 600];
/** how long /metrics waits for a gauge source (a database read); later, its gauges are left out */
export const GAUGE_SOURCE_TIMEOUT_MS = 2_000;

/** The database connections of this process at one moment (`core_db_pool_*`, DESIGN §10). */
export interface DatabasePoolStats {
  /** connections the pool may open */
  max: number;
  /** connections lent out, running a query or a transaction */
  busy: number;
  idle: number;
  /** queries or transactions waiting for a connection */
  waiting: number;
}

/**
 * Gauges read from something slower than memory (the database) when /metrics is read: one cheap,
 * set-based read answers every gauge of the source, as samples by metric name.
 */
export interface GaugeSource {
  /** its name in `core_metrics_source_up{source}` */
  name: string;
  gauges: { name: string; help: string }[];
  read(): Promise<Record<string, Sample[]>>;
}

/** One worker job's backlog now: how many items are due, and how long the oldest of them has been. */
export interface JobBacklog {
  job: string;
  due: number;
  /** 0 when nothing is due */
  oldestDueSeconds: number;
}

/**
 * The gauges of workers' backlogs (DESIGN §10), `core_worker_due_items{job}` and
 * `core_worker_oldest_due_age_seconds{job}`, from one read of every job's backlog.
 */
export function workerBacklogSource(name: string, read: () => Promise<JobBacklog[]>): GaugeSource {
  return {
    name,
    gauges: [
      { name: "core_worker_due_items", help: "Items of a worker's job that are due now and not done yet, by job" },
      { name: "core_worker_oldest_due_age_seconds", help: "How long the oldest due item of a worker's job has been due, by job (0: none due)" },
    ],
    read: async () => {
      const backlogs = await read();
      return {
        core_worker_due_items: backlogs.map((b) => ({ labels: { job: b.job }, value: b.due })),
        core_worker_oldest_due_age_seconds: backlogs.map((b) => ({ labels: { job: b.job }, value: Math.max(0, b.oldestDueSeconds) })),
      };
    },
  };
}

/**
 * prom-client's default metrics (CPU, memory, event-loop lag, GC, handles), collected once per process:
 * several services in one process each show the same metric objects, under their own `service` label,
 * rather than each starting collectors of its own (an event-loop monitor and a GC observer apiece).
 */
let processMetrics: Registry | undefined;
function processMetricsRegistry(): Registry {
  if (!processMetrics) {
    processMetrics = new Registry();
    collectDefaultMetrics({ register: processMetrics });
  }
  return processMetrics;
}

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
export interface Sample {
  labels: Labels;
  value: number;
  metricName?: string;
}

/**
 * Prometheus metrics of one service (`GET /metrics`), labelled by route pattern, never raw path:
 * `http_requests_total` (method, route, status) and `http_request_duration_seconds` (method,
 * route). A request only adds to plain counters; the Prometheus samples are built when /metrics is
 * read. prom-client's own metrics hash and check their labels on every observation, which cost the
 * hot path several per cent of its time (ADR 0005); here they serve the format, the process
 * metrics, and the counters of work that is not per request (collections, usage batches).
 *
 * Ours are named `core_*` (docs/vault/cross-cutting/observability.md). Gauges that need a database
 * read are read when /metrics is: at most one read per source at a time, waited for at most
 * `GAUGE_SOURCE_TIMEOUT_MS`, so /metrics answers even while the database does not.
 */
export class ServiceMetrics {
  readonly registry = new Registry();
  private readonly tallies = new Map<string, Map<string, RouteTally>>();
  private passes: Histogram<"job"> | undefined;
  /** each gauge source's read in the current scrape, by name (`core_metrics_source_up`) */
  private readonly sources = new Map<string, () => Promise<unknown>>();

  constructor(service: string, options: { processMetrics?: boolean; databasePool?: () => DatabasePoolStats | null } = {}) {
    this.registry.setDefaultLabels({ service });
    if (options.processMetrics) for (const metric of processMetricsRegistry().getMetricsAsArray()) this.registry.registerMetric(metric as unknown as Parameters<Registry["registerMetric"]>[0]);
    this.register("http_requests_total", "HTTP requests answered, by route pattern and status", "counter", () => this.requestSamples());
    this.register("http_request_duration_seconds", "HTTP request duration in seconds", "histogram", () => this.durationSamples());
    if (options.databasePool) this.poolGauges(options.databasePool);
  }

  /** A counter of ours, registered with this service's metrics. */
  counter<L extends string>(name: string, help: string, labelNames: readonly L[] = []): Counter<L> {
    return new Counter({ name, help, labelNames, registers: [this.registry] });
  }

  /**
   * Names the jobs a worker of this service runs, so each one's `core_worker_pass_duration_seconds`
   * series is there at 0 from the start: an alert on passes that stopped (`increase(…_count) == 0`)
   * then also fires for a replica whose worker never ran, where an absent series would say nothing.
   */
  workerJobs(...jobs: string[]): void {
    const passes = this.passHistogram();
    for (const job of jobs) passes.zero({ job });
  }

  /** Runs one pass of a worker's job, observing how long it took in `core_worker_pass_duration_seconds{job}`, failed or not. */
  async timePass<T>(job: string, pass: () => Promise<T>): Promise<T> {
    const end = this.passHistogram().startTimer({ job });
    try {
      return await pass();
    } finally {
      end();
    }
  }

  private passHistogram(): Histogram<"job"> {
    return (this.passes ??= new Histogram({ name: "core_worker_pass_duration_seconds", help: "How long one pass of a worker's job took, by job", labelNames: ["job"], buckets: PASS_BUCKETS, registers: [this.registry] }));
  }

  /**
   * Adds the gauges of `source`, read when /metrics is read. A read still running is shared, never
   * started twice (a database that hangs is asked once); one that fails or takes longer than
   * `GAUGE_SOURCE_TIMEOUT_MS` leaves its gauges out and shows 0 in `core_metrics_source_up`.
   */
  addGaugeSource(source: GaugeSource): void {
    let running: Promise<Record<string, Sample[]>> | undefined;
    let scrape: Promise<Record<string, Sample[]> | null> | undefined;
    // the source's gauges and its up sample ask at once in one scrape, and share one read
    const reading = () => {
      if (!scrape) {
        running ??= source.read().finally(() => (running = undefined));
        scrape = withinTime(running, GAUGE_SOURCE_TIMEOUT_MS).then(
          (samples) => samples,
          () => null,
        );
        void scrape.then(() => (scrape = undefined));
      }
      return scrape;
    };
    for (const gauge of source.gauges) this.register(gauge.name, gauge.help, "gauge", async () => (await reading())?.[gauge.name] ?? []);
    if (this.sources.size === 0) {
      const help = "Whether a source of gauges (a database read) answered in time when /metrics was read: 1 yes, 0 no, and its gauges are left out";
      this.register("core_metrics_source_up", help, "gauge", () =>
        Promise.all([...this.sources].map(async ([name, read]) => ({ labels: { source: name }, value: (await read()) ? 1 : 0 }))),
      );
    }
    this.sources.set(source.name, reading);
  }

  /** the pool's gauges; a database without a pool (the embedded one) shows none */
  private poolGauges(pool: () => DatabasePoolStats | null): void {
    const gauge = (name: string, help: string, samples: (now: DatabasePoolStats) => Sample[]) =>
      this.register(name, help, "gauge", () => {
        const now = pool();
        return now ? samples(now) : [];
      });
    gauge("core_db_pool_connections", "Database connections of this process's pool, by state (busy: lent to a query or transaction); their sum is the pool's size now", (now) => [
      { labels: { state: "busy" }, value: now.busy },
      { labels: { state: "idle" }, value: now.idle },
    ]);
    gauge("core_db_pool_max_connections", "Connections the database pool may open", (now) => [{ labels: {}, value: now.max }]);
    gauge("core_db_pool_waiting", "Queries or transactions waiting for a database connection", (now) => [{ labels: {}, value: now.waiting }]);
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
  private register(name: string, help: string, type: "counter" | "histogram" | "gauge", samples: () => Sample[] | Promise<Sample[]>): void {
    const metric = {
      name,
      help,
      type,
      aggregator: "sum",
      get: async () => ({ name, help, type, aggregator: "sum", values: await samples() }),
      reset: () => this.tallies.clear(),
    };
    this.registry.registerMetric(metric as unknown as Parameters<Registry["registerMetric"]>[0]);
  }
}

/** `promise`, or a rejection once `ms` have passed without it settling. */
export function withinTime<T>(promise: Promise<T>, ms: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms);
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err);
      },
    );
  });
}
