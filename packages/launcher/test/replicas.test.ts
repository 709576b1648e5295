import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { ConfigError } from "@core/kit";
import { replicaEnv, restartDelayMs, superviseReplicas, type ReplicaPlan } from "../src/replicas.js";

const ROOT = fileURLToPath(new URL("../../..", import.meta.url));
const dir = mkdtempSync(join(tmpdir(), "core-replicas-unit-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A stand-in replica: says it is ready with its port, then does what `behaviour` says. */
function script(name: string, behaviour: string): string {
  const path = join(dir, `${name}.mjs`);
  writeFileSync(
    path,
    `const replica = Number(process.env.CORE_REPLICA);
process.send({ type: "core:ready", urls: { iam: "http://127.0.0.1:" + process.env.CORE_IAM_PORT } });
process.on("SIGTERM", () => process.exit(0));
setInterval(() => {}, 1000);
${behaviour}
`,
  );
  return path;
}

/**
 * Supervises stand-in replicas of IAM through `check`, with what the supervisor says, then stops
 * them all and answers the supervisor's exit code.
 */
async function supervising(plan: Omit<ReplicaPlan, "services" | "args" | "say">, check: (lines: string[]) => Promise<void>): Promise<number> {
  const lines: string[] = [];
  const running = await superviseReplicas({ services: ["iam"], args: [], say: (line) => lines.push(line), ...plan });
  try {
    await check(lines);
  } finally {
    await running.stop();
  }
  return running.stopped;
}

/** Script lines that count this replica's lives in `file`: `life` is 1 in its first. */
const countLives = (file: string) => `import { appendFileSync, readFileSync } from "node:fs";
appendFileSync(${JSON.stringify(file)}, process.env.CORE_REPLICA + "\\n");
const life = readFileSync(${JSON.stringify(file)}, "utf8").split("\\n").filter((l) => l === process.env.CORE_REPLICA).length;`;

async function until(check: () => boolean, what: string, ms = 20_000) {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe("replicaEnv", () => {
  it("moves each service to its base port plus the replica's index, and keeps shared addresses", () => {
    const env = replicaEnv({ CORE_IAM_PORT: "5100", CORE_IAM_URL: "https://iam.example.com" }, 3);
    expect(env.CORE_REPLICA).toBe("3");
    expect(env.CORE_IAM_PORT).toBe("5103");
    expect(env.CORE_BILLING_PORT).toBe("4203");
    expect(env.CORE_VAULT_PORT).toBe("4503");
    expect(env.CORE_IAM_URL).toBe("https://iam.example.com");
  });

  it("moves only the services that run; another's address stays where that service is", () => {
    const env = replicaEnv({}, 1, ["billing"]);
    expect(env.CORE_BILLING_PORT).toBe("4201");
    expect(env.CORE_IAM_PORT).toBeUndefined();
  });

  it("keeps port 0 (any free port) for every replica, and refuses a port beyond 65535 with a ConfigError", () => {
    expect(replicaEnv({ CORE_IAM_PORT: "0" }, 2).CORE_IAM_PORT).toBe("0");
    expect(() => replicaEnv({ CORE_IAM_PORT: "65535" }, 1)).toThrow(ConfigError);
    expect(() => replicaEnv({ CORE_IAM_PORT: "65535" }, 1)).toThrow("replica 1 of iam would need port 65536; set CORE_IAM_PORT or CORE_BASE_PORT lower");
  });

  it("moves a copy on CORE_BASE_PORT: each service at its offset plus the replica's index; an explicit port wins", () => {
    const env = replicaEnv({ CORE_BASE_PORT: "5100", CORE_BILLING_PORT: "7000" }, 2);
    expect([env.CORE_IAM_PORT, env.CORE_BILLING_PORT, env.CORE_STACK_REGISTRY_PORT, env.CORE_PLATFORM_REGISTRY_PORT, env.CORE_VAULT_PORT]).toEqual(["5102", "7002", "5302", "5402", "5502"]);
    expect(env.CORE_BASE_PORT).toBe("5100");
  });

  it("keeps every address set with CORE_<SERVICE>_URL, new names and former ones, and sets none that was not", () => {
    const balancer = {
      CORE_IAM_URL: "http://127.0.0.1:8100",
      CORE_BILLING_URL: "http://127.0.0.1:8200",
      CORE_STACK_REGISTRY_URL: "http://127.0.0.1:8300",
      CORE_PLATFORM_REGISTRY_URL: "http://127.0.0.1:8400",
      CORE_VAULT_URL: "http://127.0.0.1:8500/mcp",
    };
    const env = replicaEnv({ ...balancer, CORE_MCP_URL: "http://old.example/mcp" }, 1);
    for (const [name, value] of Object.entries(balancer)) expect(env[name], name).toBe(value);
    expect(env.CORE_MCP_URL).toBe("http://old.example/mcp");
    expect(env.CORE_IAM_PORT).toBe("4101");
    expect(replicaEnv({}, 1).CORE_PLATFORM_REGISTRY_URL).toBeUndefined();
  });
});

describe("restartDelayMs", () => {
  it("waits 1, 2, 4 … s after each failure in a row, at most 30 s", () => {
    expect([1, 2, 3, 4, 5, 6, 7, 100].map((failures) => restartDelayMs(failures))).toEqual([1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000, 30_000]);
  });
});

describe("superviseReplicas", () => {
  it("starts every replica, answers their addresses, and stops them all", async () => {
    const lines: string[] = [];
    const running = await superviseReplicas({ replicas: 3, services: ["iam"], args: [], script: script("steady", ""), say: (l) => lines.push(l), env: { CORE_IAM_PORT: "6100" } });
    expect(running.urls.map((u) => u.iam)).toEqual(["http://127.0.0.1:6100", "http://127.0.0.1:6101", "http://127.0.0.1:6102"]);
    await running.stop();
    expect(await running.stopped).toBe(0);
    expect(lines).toEqual([]);
  });

  it("starts a replica that dies again after a second, and says so", async () => {
    // replica 1 dies once, 300 ms after it starts; its second life is steady
    const dies = script("dies-once", `${countLives(join(dir, "dies-once-lives"))}
if (replica === 1 && life === 1) setTimeout(() => process.kill(process.pid, "SIGKILL"), 300);`);
    await supervising({ replicas: 2, script: dies, env: { CORE_IAM_PORT: "6200" } }, async (lines) => {
      await until(() => lines.some((l) => l.includes("running again")), "replica 1 to run again");
      expect(lines).toEqual(["core: replica 1 was killed (SIGKILL); starting it again in 1 s", "core: replica 1 is running again"]);
    });
  });

  it("keeps starting a replica that keeps dying, waiting twice as long each time up to the most, and never stops the others", async () => {
    const lives = join(dir, "crash-loop-lives");
    // every life of replica 0 dies 50 ms after it is ready; replica 1 lives on
    const crashing = script("crash-loop", `${countLives(lives)}
if (replica === 0) setTimeout(() => process.exit(3), 50);`);
    const backoff = { firstMs: 100, maxMs: 800, steadyMs: 60_000 };
    const code = await supervising({ replicas: 2, script: crashing, env: { CORE_IAM_PORT: "6300" }, backoff }, async (lines) => {
      const restarts = () => lines.filter((l) => l.includes("starting it again"));
      await until(() => restarts().length >= 6, "six restarts of replica 0");
      expect(restarts().slice(0, 6)).toEqual([0.1, 0.2, 0.4, 0.8, 0.8, 0.8].map((s) => `core: replica 0 exited with code 3; starting it again in ${s} s`));
      expect(lines).toContain("core: replica 0 is running again");
      // the other replica was never stopped, nor started again
      expect(readFileSync(lives, "utf8").split("\n").filter((l) => l === "1")).toHaveLength(1);
    });
    expect(code).toBe(0);
  }, 30_000);

  it("retries a restarted replica that fails while starting (its database is down) until it starts, by itself", async () => {
    const up = join(dir, "database-up");
    // replica 0's first life runs 100 ms and is killed; later lives exit before they are ready while \`up\` is missing
    const flaky = join(dir, "flaky.mjs");
    writeFileSync(
      flaky,
      `${countLives(join(dir, "flaky-lives"))}
import { existsSync } from "node:fs";
const replica = Number(process.env.CORE_REPLICA);
if (replica === 0 && life > 1 && !existsSync(${JSON.stringify(up)})) process.exit(1);
process.send({ type: "core:ready", urls: {} });
process.on("SIGTERM", () => process.exit(0));
setInterval(() => {}, 1000);
if (replica === 0 && life === 1) setTimeout(() => process.kill(process.pid, "SIGKILL"), 100);
`,
    );
    const code = await supervising({ replicas: 2, script: flaky, env: {}, backoff: { firstMs: 100, maxMs: 400, steadyMs: 60_000 } }, async (lines) => {
      await until(() => lines.length >= 4, "three failed starts of replica 0");
      expect(lines.slice(0, 4)).toEqual([
        "core: replica 0 was killed (SIGKILL); starting it again in 0.1 s",
        "core: replica 0 exited with code 1 while starting; starting it again in 0.2 s",
        "core: replica 0 exited with code 1 while starting; starting it again in 0.4 s",
        "core: replica 0 exited with code 1 while starting; starting it again in 0.4 s",
      ]);
      writeFileSync(up, "");
      await until(() => lines.includes("core: replica 0 is running again"), "replica 0 to run again");
    });
    expect(code).toBe(0);
  }, 30_000);

  it("counts failures from zero again after a replica ran steadily", async () => {
    // lives 1-3 die at once; the 4th runs 1.5 s (longer than steadyMs) and then dies
    const steady = script("steady-then-dies", `${countLives(join(dir, "steady-lives"))}
setTimeout(() => process.exit(3), life === 4 ? 1_500 : 20);`);
    await supervising({ replicas: 1, script: steady, env: {}, backoff: { firstMs: 100, maxMs: 10_000, steadyMs: 500 } }, async (lines) => {
      const restarts = () => lines.filter((l) => l.includes("starting it again"));
      await until(() => restarts().length >= 5, "five restarts");
      expect(restarts().slice(0, 5).map((l) => l.split(" in ")[1])).toEqual(["0.1 s", "0.2 s", "0.4 s", "0.1 s", "0.2 s"]);
    });
  }, 30_000);

  it("stops the command when a replica fails on its very first start, with its reason", async () => {
    const never = join(dir, "never.mjs");
    writeFileSync(never, `if (process.env.CORE_REPLICA === "1") process.exit(2); process.send({ type: "core:ready", urls: {} }); process.on("SIGTERM", () => process.exit(0)); setInterval(() => {}, 1000);`);
    const said: string[] = [];
    await expect(superviseReplicas({ replicas: 2, services: ["iam"], args: [], script: never, say: (l) => said.push(l), env: {} })).rejects.toThrow("replica 1 exited with code 2 before it started");
    expect(said).toEqual(["core: replica 1 exited with code 2 before it started"]);
  });
});

// each start may rebuild the launcher first (scripts/start.mjs), which on a busy machine takes a while
describe("npm start -- --replicas", { timeout: 120_000 }, () => {
  const start = (args: string[], env: NodeJS.ProcessEnv = {}) => {
    const { DATABASE_URL: _ignored, ...rest } = process.env;
    return spawnSync(process.execPath, ["scripts/start.mjs", ...args], { cwd: ROOT, env: { ...rest, ...env }, encoding: "utf8", timeout: 60_000 });
  };

  it("refuses the embedded database (exit 1), and a count outside 1-32 or --migrate-only with the usage line (exit 2)", () => {
    const embedded = start(["--replicas", "2"]);
    expect(embedded.status).toBe(1);
    expect(embedded.stderr).toContain("core: --replicas needs PostgreSQL (set DATABASE_URL): the embedded database belongs to one process");
    for (const count of ["0", "33", "two", "-1"]) {
      const refused = start([`--replicas=${count}`], { DATABASE_URL: "postgres://127.0.0.1:1/none" });
      expect(refused.status, count).toBe(2);
      expect(refused.stderr).toContain(`core: --replicas takes a number from 1 to 32, got "${count}"\nusage: npm start -- [--only`);
    }
    const migrate = start(["--replicas", "2", "--migrate-only"], { DATABASE_URL: "postgres://127.0.0.1:1/none" });
    expect(migrate.status).toBe(2);
    expect(migrate.stderr).toContain("--replicas and --migrate-only do not go together");
    expect(migrate.stderr).toContain("usage: npm start");
  });

  it("says in one line which replica's port would pass 65535, without starting any", () => {
    const refused = start(["--replicas", "3"], { DATABASE_URL: "postgres://127.0.0.1:1/none", CORE_IAM_PORT: "65534" });
    expect(refused.status).toBe(1);
    expect(refused.stderr.trim()).toBe("core: replica 2 of iam would need port 65536; set CORE_IAM_PORT or CORE_BASE_PORT lower");
  });
});
