import { fork, type ChildProcess } from "node:child_process";
import { SERVICES, loadCommonConfig, type ServiceName } from "@core/kit";

/** The most replicas one command runs: their ports are the base port plus 0..MAX_REPLICAS-1. */
export const MAX_REPLICAS = 32;
/** A replica that dies this many times within RESTART_WINDOW_MS is not started again: it would only die again. */
const MAX_RESTARTS = 5;
const RESTART_WINDOW_MS = 60_000;
const RESTART_DELAY_MS = 1_000;
/** how long a stopping replica may take before it is killed */
const STOP_GRACE_MS = 10_000;

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
    if (port > 65535) throw new Error(`replica ${index} of ${name} would need port ${port}; set ${SERVICES[name].portVar} lower`);
    // only the services this command runs move; another's address is where that service already is
    if (services.includes(name)) own[SERVICES[name].portVar] = String(port);
  }
  return own;
}

/**
 * `npm start -- --replicas N` (DESIGN §1): N processes, each running the services on its own ports,
 * all on one PostgreSQL database. Nothing is shared between them but the database, which is what
 * makes them replicas. A replica that dies is started again; stopping the supervisor stops them all.
 * Resolves with the replicas' addresses once every one listens.
 */
export function superviseReplicas(plan: ReplicaPlan): Promise<{ urls: Record<string, string>[]; stop: () => Promise<void>; stopped: Promise<number> }> {
  const env = plan.env ?? process.env;
  const say = plan.say ?? ((line: string) => process.stderr.write(`${line}\n`));
  const script = plan.script ?? process.argv[1]!;
  const children: (ChildProcess | null)[] = Array.from({ length: plan.replicas }, () => null);
  const urls: Record<string, string>[] = Array.from({ length: plan.replicas }, () => ({}));
  const crashes: number[][] = Array.from({ length: plan.replicas }, () => []);
  const ready = new Set<number>();
  let stopping = false;
  let finish!: (code: number) => void;
  const stopped = new Promise<number>((resolve) => (finish = resolve));
  let settleStart!: { resolve: () => void; reject: (err: Error) => void };
  const started = new Promise<void>((resolve, reject) => (settleStart = { resolve, reject }));
  started.catch(() => {});

  const envs = children.map((_, index) => replicaEnv(env, index, plan.services));

  const launch = (index: number) => {
    const child = fork(script, plan.args, { env: envs[index], stdio: ["ignore", "inherit", "inherit", "ipc"] });
    children[index] = child;
    child.on("message", (message: ReadyMessage) => {
      if (message?.type !== "core:ready") return;
      urls[index] = message.urls;
      const first = !ready.has(index);
      ready.add(index);
      if (!first) say(`core: replica ${index} is running again`);
      if (ready.size === plan.replicas) settleStart.resolve();
    });
    child.on("exit", (code, signal) => {
      children[index] = null;
      // a stop waits for every replica itself
      if (stopping) return;
      const how = signal ? `was killed (${signal})` : `exited with code ${code}`;
      if (!ready.has(index)) {
        // it never started: a port in use or a configuration error, which another try will not mend
        say(`core: replica ${index} ${how} before it started`);
        settleStart.reject(new Error(`replica ${index} ${how} before it started`));
        void stopAll(1);
        return;
      }
      const now = Date.now();
      crashes[index] = [...crashes[index]!.filter((at) => now - at < RESTART_WINDOW_MS), now];
      if (crashes[index]!.length >= MAX_RESTARTS) {
        say(`core: replica ${index} ${how}, ${MAX_RESTARTS} times within a minute; stopping every replica`);
        void stopAll(1);
        return;
      }
      say(`core: replica ${index} ${how}; starting it again`);
      setTimeout(() => {
        if (!stopping) launch(index);
      }, RESTART_DELAY_MS).unref();
    });
  };

  const stopAll = async (code: number) => {
    if (stopping) return;
    stopping = true;
    const running = children.filter((c): c is ChildProcess => c !== null);
    if (running.length === 0) {
      finish(code);
      return;
    }
    for (const child of running) child.kill("SIGTERM");
    const killer = setTimeout(() => {
      for (const child of children) child?.kill("SIGKILL");
    }, STOP_GRACE_MS);
    killer.unref();
    await new Promise<void>((resolve) => {
      const check = setInterval(() => {
        if (children.every((c) => c === null)) {
          clearInterval(check);
          clearTimeout(killer);
          resolve();
        }
      }, 50);
    });
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
