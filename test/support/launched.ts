import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import type { ServiceName } from "@core/kit";
import { portIsFree, testPortRange } from "../../services/iam/test/support/harness.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
export const SERVICE_NAMES: ServiceName[] = ["iam", "billing", "stack-registry", "platform-registry", "vault"];
const PORT_VARS: Record<ServiceName, string> = {
  iam: "CORE_IAM_PORT",
  billing: "CORE_BILLING_PORT",
  "stack-registry": "CORE_STACK_REGISTRY_PORT",
  "platform-registry": "CORE_PLATFORM_REGISTRY_PORT",
  vault: "CORE_VAULT_PORT",
};

/** `npm start` as a user runs it (`node scripts/start.mjs …`), its output kept for the test to read. */
export interface Launched {
  child: ChildProcess;
  output(): string;
  exited: Promise<number | null>;
  /** resolves once the banner is printed; rejects when the process exits first */
  running: Promise<void>;
  stop(): Promise<number | null>;
}

export function launch(env: NodeJS.ProcessEnv, args: string[] = []): Launched {
  const child = spawn(process.execPath, ["scripts/start.mjs", ...args], {
    cwd: ROOT,
    // a pooled connection's budget that holds on a loaded machine (issue 26); a test may set its own
    env: { ...process.env, NODE_ENV: "production", LOG_LEVEL: "info", CORE_DB_POOL_WAIT_SECONDS: "60", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout!.on("data", (d) => (output += d));
  child.stderr!.on("data", (d) => (output += d));
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  const running = new Promise<void>((resolve, reject) => {
    const check = setInterval(() => {
      if (/core is running/.test(output)) {
        clearInterval(check);
        resolve();
      }
    }, 50);
    void exited.then((code) => {
      clearInterval(check);
      reject(new Error(`the launcher exited (${code}) before it was running:\n${output.slice(-4000)}`));
    });
  });
  running.catch(() => {});
  return {
    child,
    output: () => output,
    exited,
    running,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      return exited;
    },
  };
}


/**
 * Base ports for every service with `replicas` free ports from each (base, base+1, …), and the
 * environment that puts the services there.
 */
export async function replicaPorts(replicas: number): Promise<{ env: NodeJS.ProcessEnv; url: (service: ServiceName, replica: number) => string }> {
  const bases: Partial<Record<ServiceName, number>> = {};
  const taken = new Set<number>();
  const range = testPortRange();
  for (const name of SERVICE_NAMES) {
    for (let attempt = 0; ; attempt++) {
      if (attempt > 200) throw new Error("no free run of ports");
      const base = range.low + Math.floor(Math.random() * (range.high - range.low - replicas));
      const run = Array.from({ length: replicas }, (_, i) => base + i);
      if (run.some((p) => taken.has(p))) continue;
      if (!(await Promise.all(run.map(portIsFree))).every(Boolean)) continue;
      run.forEach((p) => taken.add(p));
      bases[name] = base;
      break;
    }
  }
  const env: NodeJS.ProcessEnv = {};
  for (const name of SERVICE_NAMES) env[PORT_VARS[name]] = String(bases[name]);
  return { env, url: (service, replica) => `http://127.0.0.1:${bases[service]! + replica}` };
}

export async function until<T>(check: () => Promise<T | undefined | false> | T | undefined | false, what: string, ms = 30_000, every = 100): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, every));
  }
}

/**
 * `fetch` as a well-behaved client sends it: a 503 is asked again after its `Retry-After` (at most
 * 5 s at a time) until `budgetMs` has passed, then the last answer is returned. For a test's set-up
 * steps, which must not fail because a loaded machine made the database answer slower than the
 * services' budget (issue 26); what a test measures is sent with plain `fetch`.
 */
export async function fetchRetrying(url: string, init: RequestInit = {}, budgetMs = 60_000): Promise<Response> {
  const deadline = Date.now() + budgetMs;
  for (;;) {
    const response = await fetch(url, init);
    if (response.status !== 503 || Date.now() >= deadline) return response;
    const after = Number(response.headers.get("retry-after"));
    await response.body?.cancel();
    const waitMs = Math.min(5_000, Number.isFinite(after) && after > 0 ? after * 1000 : 1_000, Math.max(0, deadline - Date.now()));
    await new Promise((resolve) => setTimeout(resolve, waitMs));
  }
}
