import { fork, type ChildProcess } from "node:child_process";
import { ConfigError, SERVICES, loadCommonConfig, type ServiceName } from "@core/kit";

/** The most replicas one command runs: their ports are the base port plus 0..MAX_REPLICAS-1. */
export const MAX_REPLICAS = 32;
/** how long a stopping replica may take before it is killed */
const STOP_GRACE_MS = 10_000;

/** When a replica that exited is started again (DESIGN §10). */
export interface RestartBackoff {
  /** the wait before the first restart; it doubles with each failure in a row */
  firstMs: number;
  /** the longest wait */
  maxMs: number;
  /** a replica that ran this long after it was ready counts its failures from zero again */
  steadyMs: number;
}

/** 1, 2, 4 … s, at most 30 s; a minute up forgives what came before. */
export const RESTART_BACKOFF: RestartBackoff = { firstMs: 1_000, maxMs: 30_000, steadyMs: 60_000 };

/** The wait before the restart that follows `failures` exits in a row (1 for the first). */
export function restartDelayMs(failures: number, backoff: RestartBackoff = RESTART_BACKOFF): number {
  return Math.min(backoff.maxMs, backoff.firstMs * 2 ** Math.min(failures - 1, 30));
}

/** What a replica tells its supervisor once its services listen. */
export interface ReadyMessage {
  type: "core:ready";
  urls: Record<string, string>;
}

export interface ReplicaPlan {
  replicas: number;
  services: ServiceName[];
  /** the launcher's own arguments, less `--replicas` */
  args: string[];
  env?: NodeJS.ProcessEnv;
  /** the script each replica runs; default: this process's */
  script?: string;
  /** where the supervisor says what happens; default: stderr */
  say?: (line: string) => void;
  /** default RESTART_BACKOFF; shorter in tests */
  backoff?: RestartBackoff;
}

/**
 * The environment of replica `index`: each service on its base port plus the index, so replica 0
 * keeps the usual ports (4100, 4200, …) and replica 1 takes the next (4101, 4201, …). A port of 0
 * (any free one) stays 0. Addresses set with `CORE_<NAME>_URL` (a load balancer's) are kept, and
 * the others follow the replica's own ports, so a replica's services talk to each other.
 */
export function replicaEnv(env: NodeJS.ProcessEnv, index: number, services: ServiceName[] = Object.keys(SERVICES) as ServiceName[]): NodeJS.ProcessEnv {
  const common = loadCommonConfig(env);
  const own: NodeJS.ProcessEnv = { ...env, CORE_REPLICA: String(index) };
  for (const name of Object.keys(SERVICES) as ServiceName[]) {
    const base = common.port(name);
    if (base === 0) continue;
    const port = base + index;
    if (port > 65535) throw new ConfigError(`replica ${index} of ${name} would need port ${port}; set ${SERVICES[name].portVar} or CORE_BASE_PORT lower`);
    // only the services this command runs move; another's address is where that service already is
    if (services.includes(name)) own[SERVICES[name].portVar] = String(port);
  }
  return own;
}

/** One replica as its supervisor sees it. */
interface Replica {
  child: ChildProcess | null;
  /** how many times it was started */
  lives: number;
  /** when this life said it was ready, else null */
  readyAt: number | null;
  /** exits in a row without a steady run between them */
  failures: number;
  /** the pending restart */
  restart: NodeJS.Timeout | null;
}

/**
 * `npm start -- --replicas N` (DESIGN §1, §10): N processes, each running the services on its own
 * ports, all on one PostgreSQL database. Nothing is shared between them but the database, which is
 * what makes them replicas. A replica that exits is started again after 1, 2, 4 … s (at most 30 s),
 * however often it fails: one that cannot start (its database is down) keeps being tried and comes
 * back by itself when it can, and is never a reason to stop the others. Only a replica that fails
 * on its very first start (a port in use, a configuration error) stops the command: no later try
 * would mend that. Stopping the supervisor stops them all. Resolves with the replicas' addresses
 * once every one listens.
 */
export function superviseReplicas(plan: ReplicaPlan): Promise<{ urls: Record<string, string>[]; stop: () => Promise<void>; stopped: Promise<number> }> {
  const env = plan.env ?? process.env;
  const say = plan.say ?? ((line: string) => process.stderr.write(`${line}\n`));
  const script = plan.script ?? process.argv[1]!;
  const backoff = plan.backoff ?? RESTART_BACKOFF;
  // a ConfigError here (a port beyond 65535) is thrown before any replica starts
  const envs = Array.from({ length: plan.replicas }, (_, index) => replicaEnv(env, index, plan.services));
  const replicas: Replica[] = envs.map(() => ({ child: null, lives: 0, readyAt: null, failures: 0, restart: null }));
  const urls: Record<string, string>[] = envs.map(() => ({}));
  let starting = true;
  let stopping = false;
  let finish!: (code: number) => void;
  const stopped = new Promise<number>((resolve) => (finish = resolve));
  let settleStart!: { resolve: () => void; reject: (err: Error) => void };
  const started = new Promise<void>((resolve, reject) => (settleStart = { resolve, reject }));
  started.catch(() => {});

  const launch = (index: number) => {
    const replica = replicas[index]!;
    replica.restart = null;
    replica.lives++;
    replica.readyAt = null;
    const child = fork(script, plan.args, { env: envs[index], stdio: ["ignore", "inherit", "inherit", "ipc"] });
    replica.child = child;
    child.on("message", (message: ReadyMessage) => {
      if (message?.type !== "core:ready") return;
      urls[index] = message.urls;
      replica.readyAt = Date.now();
      if (replica.lives > 1) say(`core: replica ${index} is running again`);
      if (starting && replicas.every((r) => r.readyAt !== null)) {
        starting = false;
        settleStart.resolve();
      }
    });
    child.on("exit", (code, signal) => {
      replica.child = null;
      // a stop waits for every replica itself
      if (stopping) return;
      const how = signal ? `was killed (${signal})` : `exited with code ${code}`;
      if (replica.readyAt === null && replica.lives === 1) {
        // it never started: a port in use or a configuration error, which another try will not mend
        say(`core: replica ${index} ${how} before it started`);
        settleStart.reject(new Error(`replica ${index} ${how} before it started`));
        void stopAll(1);
        return;
      }
      if (replica.readyAt !== null && Date.now() - replica.readyAt >= backoff.steadyMs) replica.failures = 0;
      replica.failures++;
      const delay = restartDelayMs(replica.failures, backoff);
      const when = replica.readyAt === null ? " while starting" : "";
      say(`core: replica ${index} ${how}${when}; starting it again in ${formatSeconds(delay)}`);
      // kept referenced: with every replica down, this timer is what keeps the supervisor alive
      replica.restart = setTimeout(() => launch(index), delay);
    });
  };

  const stopAll = async (code: number) => {
    if (stopping) return;
    stopping = true;
    for (const replica of replicas) if (replica.restart) clearTimeout(replica.restart);
    const running = replicas.flatMap((r) => (r.child ? [r.child] : []));
    for (const child of running) child.kill("SIGTERM");
    const killer = setTimeout(() => {
      for (const replica of replicas) replica.child?.kill("SIGKILL");
    }, STOP_GRACE_MS);
    killer.unref();
    await Promise.all(running.map((child) => (child.exitCode !== null || child.signalCode !== null ? null : new Promise((resolve) => child.once("exit", resolve)))));
    clearTimeout(killer);
    finish(code);
  };

  for (let index = 0; index < plan.replicas; index++) launch(index);
  return started.then(
    () => ({
      urls,
      stop: async () => {
        await stopAll(0);
        await stopped;
      },
      stopped,
    }),
    async (err: Error) => {
      await stopped;
      throw err;
    },
  );
}

function formatSeconds(ms: number): string {
  return `${Math.round(ms / 100) / 10} s`;
}
