import { execFileSync, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../services/iam/test/support/harness.js";
import { launch, replicaPorts, until, type Launched } from "./support/launched.js";
import { postgresBin, startPrivatePostgres, type PrivatePostgres } from "./support/private-postgres.js";

/**
 * Supervision and start-up around a database that is down (DESIGN §10, issue 26): `--replicas`
 * never stops a healthy replica for one that keeps failing, and brings that one back by itself when
 * the database returns; `npm start`, `npm run migrate` and a service's own `main.js` wait for the
 * database, then give up with one sentence. The database is a PostgreSQL server of this test's own,
 * so stopping it touches no other test.
 */
const ROOT = fileURLToPath(new URL("..", import.meta.url));
/** a stack trace's frame line */
const STACK_FRAME = /\n\s+at /;
const DATABASE_SERVICES = ["iam", "billing", "stack-registry", "platform-registry"] as const;
const SERVICES = [...DATABASE_SERVICES, "vault"] as const;

if (process.env.CI && !postgresBin()) throw new Error("CI is set but the PostgreSQL server binaries are missing: the supervision tests would be skipped");

async function healthStatus(url: string): Promise<number> {
  try {
    const response = await fetch(`${url}/health`, { signal: AbortSignal.timeout(10_000) });
    await response.body?.cancel();
    return response.status;
  } catch {
    return 0;
  }
}

/** The replicas' process ids by index, read from each child's CORE_REPLICA. */
function replicaPids(supervisor: number): Map<number, number> {
  let children: number[];
  try {
    children = execFileSync("pgrep", ["-P", String(supervisor)]).toString().trim().split("\n").map(Number);
  } catch {
    // pgrep finds none while every replica is between lives
    return new Map();
  }
  const pids = new Map<number, number>();
  for (const pid of children) {
    try {
      const replica = /(?:^|\0)CORE_REPLICA=(\d+)\0/.exec(readFileSync(`/proc/${pid}/environ`, "utf8"))?.[1];
      if (replica !== undefined) pids.set(Number(replica), pid);
    } catch {
      // it exited meanwhile
    }
  }
  return pids;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe.skipIf(!postgresBin())("supervision of replicas while the database is down", { timeout: 90_000 }, () => {
  let server: PrivatePostgres;
  let replicas: Launched | undefined;
  const dataDir = mkdtempSync(join(tmpdir(), "core-supervision-"));

  beforeAll(async () => {
    server = await startPrivatePostgres();
  });
  afterAll(async () => {
    await replicas?.stop();
    await server?.destroy();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("keeps the healthy replica, starts the killed one again after 1, 2, 4 … s, and both are healthy once the database is back, with no manual step", async () => {
    const ports = await replicaPorts(2);
    // a restarted replica gives the database one second, so its failed starts (and the waits between them) come quickly
    replicas = launch({ ...ports.env, DATABASE_URL: server.url, CORE_DATA_DIR: dataDir, CORE_DB_WAIT_SECONDS: "1", LOG_LEVEL: "warn" }, ["--replicas", "2"]);
    await replicas.running;
    // the banner came once every replica's services had answered: each address answers now (a
    // loaded machine may make a dependency's check time out, so any HTTP answer counts)
    for (const status of await Promise.all([0, 1].flatMap((replica) => SERVICES.map((service) => healthStatus(ports.url(service, replica)))))) expect(status).toBeGreaterThan(0);
    const supervisor = replicas.child.pid!;
    const before = await until(() => (replicaPids(supervisor).size === 2 ? replicaPids(supervisor) : false), "both replicas' processes");

    await server.stop();
    // the healthy replica answers, and says its database is gone
    await until(async () => (await healthStatus(ports.url("iam", 1))) === 503, "replica 1 to answer degraded", 20_000, 250);
    process.kill(before.get(0)!, "SIGKILL");

    const restarts = () => [...replicas!.output().matchAll(/^core: replica 0 (.+); starting it again in ([\d.]+) s$/gm)];
    await until(() => restarts().length >= 3, "three restarts of replica 0", 60_000, 200).catch((err: Error) => {
      throw new Error(`${err.message}\n${replicas!.output().slice(-3000)}`);
    });
    expect(restarts().map((match) => Number(match[2])).slice(0, 3)).toEqual([1, 2, 4]);
    expect(restarts()[0]![1]).toBe("was killed (SIGKILL)");
    // its later lives could not start: the database is down
    expect(restarts()[1]![1]).toBe("exited with code 1 while starting");
    // each failed start said why in one sentence, without a stack
    expect(replicas.output()).toMatch(/core: the database at 127\.0\.0\.1:\d+ did not answer within 1 s \(connection refused\)/);
    expect(replicas.output()).not.toMatch(STACK_FRAME);
    // meanwhile the supervisor and the healthy replica were never stopped, and it still answers every service
    expect(replicas.child.exitCode).toBeNull();
    expect(alive(before.get(1)!)).toBe(true);
    expect(await Promise.all(DATABASE_SERVICES.map((service) => healthStatus(ports.url(service, 1))))).toEqual([503, 503, 503, 503]);
    expect(await healthStatus(ports.url("vault", 1))).toBe(200);

    await server.start();
    await until(() => replicas!.output().includes("core: replica 0 is running again"), "replica 0 to run again", 60_000, 200).catch((err: Error) => {
      throw new Error(`${err.message}\n${replicas!.output().slice(-3000)}`);
    });
    await until(
      async () => (await Promise.all([0, 1].flatMap((replica) => DATABASE_SERVICES.map((service) => healthStatus(ports.url(service, replica)))))).every((status) => status === 200),
      "every service of both replicas to be healthy",
      30_000,
      250,
    );
    // replica 1 is the process it was before the outage
    expect(replicaPids(supervisor).get(1)).toBe(before.get(1));
    expect(replicas.output()).not.toContain("stopping every replica");
  });
});

describe.skipIf(!postgresBin())("start-up waits for the database", { timeout: 90_000 }, () => {
  let server: PrivatePostgres;
  const dataDir = mkdtempSync(join(tmpdir(), "core-db-wait-"));

  beforeAll(async () => {
    server = await startPrivatePostgres();
  });
  afterAll(async () => {
    await server?.destroy();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("npm start on a database that is not up yet comes up by itself a few seconds after it does", async () => {
    await server.stop();
    const ports = await replicaPorts(1);
    const started = launch({ ...ports.env, DATABASE_URL: server.url, CORE_DATA_DIR: dataDir, CORE_DB_WAIT_SECONDS: "60", LOG_LEVEL: "warn" });
    try {
      const tries = () => started.output().match(/^core: the database at 127\.0\.0\.1:\d+ is not answering \(connection refused\); trying again in \d+ s \(\d+ s of 60\)$/gm) ?? [];
      await until(() => tries().length >= 2, "two tries", 30_000, 100);
      expect(started.child.exitCode).toBeNull();
      await server.start();
      await started.running;
      expect(await Promise.all(DATABASE_SERVICES.map((service) => healthStatus(ports.url(service, 0))))).toEqual([200, 200, 200, 200]);
      expect(started.output()).not.toMatch(STACK_FRAME);
    } finally {
      // a launcher that ended early says why in its output: a failure shows it (a CI run once saw exit 1 here)
      expect(await started.stop(), `the launcher's output:\n${started.output().slice(-4000)}`).toBe(0);
    }
  });
});

describe("start-up on a database that never answers", { timeout: 90_000 }, () => {
  const dataDir = mkdtempSync(join(tmpdir(), "core-db-never-"));
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  /** Runs `node <args>` to its end: exit code and everything it printed. */
  const run = (args: string[], env: NodeJS.ProcessEnv) =>
    new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      const child = spawn(process.execPath, args, { cwd: ROOT, env: { ...process.env, NODE_ENV: "production", LOG_LEVEL: "warn", CORE_DATA_DIR: dataDir, ...env }, stdio: ["ignore", "pipe", "pipe"] });
      let stdout = "";
      let stderr = "";
      child.stdout!.on("data", (d) => (stdout += d));
      child.stderr!.on("data", (d) => (stderr += d));
      child.on("exit", (code) => resolve({ code, stdout, stderr }));
    });

  /** a PostgreSQL URL with a password, on a port where nothing listens */
  const nowhere = async () => {
    const port = await freePort();
    return { url: `postgres://core:hunter2-secret@127.0.0.1:${port}/core`, where: `127.0.0.1:${port}` };
  };

  it.each([
    ["npm start", ["scripts/start.mjs"]],
    ["npm run migrate", ["scripts/start.mjs", "--migrate-only"]],
  ])("%s tries for CORE_DB_WAIT_SECONDS=2, one line per try, then exits 1 with one sentence and no stack", async (_, args) => {
    const { url, where } = await nowhere();
    const ports = await replicaPorts(1);
    const result = await run(args, { ...ports.env, DATABASE_URL: url, CORE_DB_WAIT_SECONDS: "2" });
    expect(result.code).toBe(1);
    const lines = result.stderr.trim().split("\n");
    expect(lines.at(-1)).toBe(`core: the database at ${where} did not answer within 2 s (connection refused); start it, or check DATABASE_URL and CORE_DB_WAIT_SECONDS`);
    expect(lines.slice(0, -1).length).toBeGreaterThanOrEqual(1);
    for (const line of lines.slice(0, -1)) expect(line).toMatch(new RegExp(`^core: the database at ${where.replace(/\./g, "\\.")} is not answering \\(connection refused\\); trying again in \\d+ s \\(\\d+ s of 2\\)$`));
    expect(result.stdout + result.stderr).not.toMatch(STACK_FRAME);
    expect(result.stdout + result.stderr).not.toContain("hunter2");
    expect(result.stdout + result.stderr).not.toContain("DrizzleQueryError");
  });

  it("a service's own main.js (node services/iam/dist/main.js) says the same with CORE_DB_WAIT_SECONDS=0: one try, one sentence", async () => {
    // the production bundle as `npm run build` makes it, written where the test owns it
    const { bundle } = (await import(pathToFileURL(join(ROOT, "scripts/build.mjs")).href)) as {
      bundle: (entry: string, outfile: string, options: { dependencies: "bundled" }) => Promise<void>;
    };
    const outDir = join(ROOT, "node_modules/.cache/core/test-supervision");
    mkdirSync(outDir, { recursive: true });
    const main = join(outDir, `iam-main-${process.pid}.js`);
    await bundle(join(ROOT, "services/iam/src/main.ts"), main, { dependencies: "bundled" });
    try {
      const { url, where } = await nowhere();
      const result = await run([main], { DATABASE_URL: url, CORE_DB_WAIT_SECONDS: "0", CORE_IAM_PORT: String(await freePort()) });
      expect(result.code).toBe(1);
      expect(result.stderr).toBe(`core: the database at ${where} is not answering (connection refused); start it, or check DATABASE_URL and CORE_DB_WAIT_SECONDS\n`);
      expect(result.stdout).not.toMatch(STACK_FRAME);
    } finally {
      rmSync(main, { force: true });
      rmSync(`${main}.map`, { force: true });
    }
  });
});
