import { execFileSync } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";
import { freePort } from "../../services/iam/test/support/harness.js";

/**
 * A PostgreSQL server of the test's own (initdb into a temporary directory, on a free loopback
 * port), for tests that stop and start the database: the machine's shared server must keep running
 * for every other test. Needs the server's binaries (Debian's postgresql package).
 */
export interface PrivatePostgres {
  url: string;
  stop(): Promise<void>;
  start(): Promise<void>;
  destroy(): Promise<void>;
}

const BIN_ROOT = "/usr/lib/postgresql";

/** The newest installed server's bin directory, or null. */
export function postgresBin(): string | null {
  if (!existsSync(BIN_ROOT)) return null;
  const versions = readdirSync(BIN_ROOT).filter((v) => existsSync(join(BIN_ROOT, v, "bin", "pg_ctl"))).sort((a, b) => Number(b) - Number(a));
  return versions[0] ? join(BIN_ROOT, versions[0], "bin") : null;
}

export async function startPrivatePostgres(): Promise<PrivatePostgres> {
  const bin = postgresBin();
  if (!bin) throw new Error(`no PostgreSQL server binaries under ${BIN_ROOT}`);
  const root = mkdtempSync(join(tmpdir(), "core-pg-"));
  const data = join(root, "data");
  const port = await freePort();
  // initdb and the server refuse to run as root: as root, they run as the postgres user
  const asRoot = userInfo().uid === 0;
  if (asRoot) {
    const id = (flag: string) => Number(execFileSync("id", [flag, "postgres"]).toString().trim());
    chownSync(root, id("-u"), id("-g"));
  }
  const run = (tool: string, args: string[]) => {
    const command = asRoot ? ["runuser", "-u", "postgres", "--", join(bin, tool), ...args] : [join(bin, tool), ...args];
    return execFileSync(command[0]!, command.slice(1), { stdio: ["ignore", "pipe", "pipe"], timeout: 60_000 });
  };
  run("initdb", ["-D", data, "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8", "--locale=C"]);
  const options = `-p ${port} -k ${root} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200`;
  const start = async () => {
    run("pg_ctl", ["start", "-D", data, "-w", "-t", "30", "-l", join(root, "server.log"), "-o", options]);
  };
  const stop = async () => {
    run("pg_ctl", ["stop", "-D", data, "-m", "fast", "-w", "-t", "30"]);
  };
  await start();
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    start,
    stop,
    destroy: async () => {
      try {
        await stop();
      } catch {
        // already stopped
      }
      rmSync(root, { recursive: true, force: true });
    },
  };
}
