import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { replicaEnv, superviseReplicas } from "../src/replicas.js";

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

  it("keeps port 0 (any free port) for every replica, and refuses a port beyond 65535", () => {
    expect(replicaEnv({ CORE_IAM_PORT: "0" }, 2).CORE_IAM_PORT).toBe("0");
    expect(() => replicaEnv({ CORE_IAM_PORT: "65535" }, 1)).toThrow(/would need port 65536/);
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

  it("starts a replica that dies again, and says so", async () => {
    const lines: string[] = [];
    // replica 1 dies once, 300 ms after it starts; its second life is steady
    const marker = join(dir, "died-once");
    const dies = script(
      "dies-once",
      `import { existsSync, writeFileSync } from "node:fs";
if (replica === 1 && !existsSync(${JSON.stringify(marker)})) { writeFileSync(${JSON.stringify(marker)}, ""); setTimeout(() => process.kill(process.pid, "SIGKILL"), 300); }`,
    );
    const running = await superviseReplicas({ replicas: 2, services: ["iam"], args: [], script: dies, say: (l) => lines.push(l), env: { CORE_IAM_PORT: "6200" } });
    const deadline = Date.now() + 10_000;
    while (!lines.some((l) => l.includes("running again")) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(lines[0]).toBe("core: replica 1 was killed (SIGKILL); starting it again");
    expect(lines).toContain("core: replica 1 is running again");
    await running.stop();
  });

  it("stops every replica when one keeps dying, and when one never starts", async () => {
    const lines: string[] = [];
    const crashing = script("crash-loop", `if (replica === 0) setTimeout(() => process.exit(3), 50);`);
    const running = await superviseReplicas({ replicas: 2, services: ["iam"], args: [], script: crashing, say: (l) => lines.push(l), env: { CORE_IAM_PORT: "6300" } });
    expect(await running.stopped).toBe(1);
    expect(lines.at(-1)).toBe("core: replica 0 exited with code 3, 5 times within a minute; stopping every replica");

    const never = join(dir, "never.mjs");
    writeFileSync(never, `if (process.env.CORE_REPLICA === "1") process.exit(2); process.send({ type: "core:ready", urls: {} }); process.on("SIGTERM", () => process.exit(0)); setInterval(() => {}, 1000);`);
    const said: string[] = [];
    await expect(superviseReplicas({ replicas: 2, services: ["iam"], args: [], script: never, say: (l) => said.push(l), env: {} })).rejects.toThrow("replica 1 exited with code 2 before it started");
    expect(said).toEqual(["core: replica 1 exited with code 2 before it started"]);
  }, 30_000);
});

describe("npm start -- --replicas", () => {
  const start = (args: string[], env: NodeJS.ProcessEnv = {}) => {
    const { DATABASE_URL: _ignored, ...rest } = process.env;
    return spawnSync(process.execPath, ["scripts/start.mjs", ...args], { cwd: ROOT, env: { ...rest, ...env }, encoding: "utf8", timeout: 30_000 });
  };

  it("refuses the embedded database, a count outside 1-32, and --migrate-only", () => {
    const embedded = start(["--replicas", "2"]);
    expect(embedded.status).toBe(1);
    expect(embedded.stderr).toContain("core: --replicas needs PostgreSQL (set DATABASE_URL): the embedded database belongs to one process");
    for (const count of ["0", "33", "two", "-1"]) {
      const refused = start([`--replicas=${count}`], { DATABASE_URL: "postgres://127.0.0.1:1/none" });
      expect(refused.status, count).toBe(1);
      expect(refused.stderr).toContain(`core: --replicas takes a number from 1 to 32, got "${count}"`);
    }
    const migrate = start(["--replicas", "2", "--migrate-only"], { DATABASE_URL: "postgres://127.0.0.1:1/none" });
    expect(migrate.status).toBe(1);
    expect(migrate.stderr).toContain("--replicas and --migrate-only do not go together");
  });
});
