import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { ServiceName } from "@core/kit";
import { freePort } from "../../services/iam/test/support/harness.js";

export { freePort };

/** Debian's HAProxy (`apt-get install -y haproxy`; `.ci/run` installs it). */
export const HAPROXY = ["/usr/sbin/haproxy", "/usr/bin/haproxy"].find((path) => existsSync(path)) ?? null;

const GUIDE = fileURLToPath(new URL("../../docs/vault/guides/running-on-postgresql.md", import.meta.url));
/** The services in the guide's order of ports: IAM on 4100/8100, billing on 4200/8200, … */
const BY_HUNDRED: ServiceName[] = ["iam", "billing", "stack-registry", "platform-registry", "vault"];

/** The guide's HAProxy configuration: the first ```haproxy block of running-on-postgresql.md (one source for the docs and the test). */
export function guideConfig(): string {
  const block = /```haproxy\n([\s\S]*?)```/.exec(readFileSync(GUIDE, "utf8"));
  if (!block) throw new Error(`${GUIDE} has no \`\`\`haproxy block`);
  return block[1]!;
}

/**
 * The guide's configuration for this machine: each service's frontend (8100 … 8500) on
 * `frontends[service]`, the stats frontend (8404) on `stats`, each replica `i` of a service at
 * `replica(service, i)`, the stats socket at `socket`, and the lines that need root or syslog (user,
 * group, chroot, the /dev/log target) left out.
 */
export function localConfig(options: { frontends: Record<ServiceName, number>; stats: number; replica: (service: ServiceName, index: number) => number; socket: string }): string {
  const frontend = (port: number) => (port === 8404 ? options.stats : options.frontends[BY_HUNDRED[port / 100 - 81]!]);
  return guideConfig()
    .split("\n")
    .filter((line) => !/^\s*(user|group|chroot|log \/dev\/log)\b/.test(line))
    .map((line) =>
      line
        .replace(/^(\s*stats socket )\S+/, `$1${options.socket}`)
        .replace(/^(\s*bind )\S*:(8[1-5]00|8404)\b/, (_, bind: string, port: string) => `${bind}127.0.0.1:${frontend(Number(port))}`)
        .replace(/127\.0\.0\.1:4([1-5])0(\d)\b/, (_, n: string, i: string) => `127.0.0.1:${options.replica(BY_HUNDRED[Number(n) - 1]!, Number(i))}`),
    )
    .join("\n");
}


export interface Balancer {
  child: ChildProcess;
  output(): string;
  /** each server's state by backend: `{ iam: { r0: "UP", r1: "DOWN" }, … }` */
  states(): Promise<Record<string, Record<string, string>>>;
  /** HAProxy's counters summed over the backends: requests sent again, and sent again to another server */
  counters(): Promise<{ retries: number; redispatches: number }>;
  stop(): Promise<void>;
}

/** Starts HAProxy in the foreground on `config` (written into `dir`). */
export async function startBalancer(dir: string, config: string, socket: string): Promise<Balancer> {
  const file = join(dir, "haproxy.cfg");
  writeFileSync(file, config);
  const child = spawn(HAPROXY!, ["-db", "-f", file], { stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  child.stdout!.on("data", (d) => (output += d));
  child.stderr!.on("data", (d) => (output += d));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const ask = (command: string) =>
    new Promise<string>((resolve, reject) => {
      let answer = "";
      const socketConnection = connect(socket, () => socketConnection.end(`${command}\n`));
      socketConnection.on("data", (d) => (answer += d));
      socketConnection.on("end", () => resolve(answer));
      socketConnection.on("error", reject);
    });
  const stat = async () => {
    const [header, ...rows] = (await ask("show stat")).trim().split("\n");
    const names = header!.replace(/^# /, "").split(",");
    return rows.map((row) => Object.fromEntries(row.split(",").map((value, i) => [names[i], value])) as Record<string, string>);
  };
  // ready when the stats socket answers
  for (let tries = 0; ; tries++) {
    if (child.exitCode !== null) throw new Error(`haproxy exited: ${output}`);
    try {
      await stat();
      break;
    } catch {
      if (tries > 100) throw new Error(`haproxy's stats socket never answered: ${output}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  return {
    child,
    output: () => output,
    states: async () => {
      const states: Record<string, Record<string, string>> = {};
      for (const row of await stat()) if (!["FRONTEND", "BACKEND"].includes(row.svname!)) (states[row.pxname!] ??= {})[row.svname!] = row.status!;
      return states;
    },
    counters: async () => {
      const backends = (await stat()).filter((row) => row.svname === "BACKEND");
      const sum = (column: string) => backends.reduce((total, row) => total + Number(row[column] || 0), 0);
      return { retries: sum("wretr"), redispatches: sum("wredis") };
    },
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      await exited;
    },
  };
}
