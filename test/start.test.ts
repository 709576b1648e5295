import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../services/iam/test/support/harness.js";

/** `npm start` as a user runs it: the real launcher process on an embedded data directory. */
interface Started {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

/** the banner's last line: once it is out, every URL above it is too (the banner comes in several writes) */
const RUNNING = "stop with Ctrl-C";

/** every launcher a test started, so one a failed test left running is stopped and frees its ports */
const launched: ChildProcess[] = [];

function start(env: NodeJS.ProcessEnv, args: string[] = []): Started {
  const child = spawn(process.execPath, ["scripts/start.mjs", ...args], { env: { ...process.env, ...env, NODE_ENV: "production" }, stdio: ["ignore", "pipe", "pipe"] });
  launched.push(child);
  let output = "";
  child.stdout!.on("data", (d) => (output += d));
  child.stderr!.on("data", (d) => (output += d));
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  return { child, output: () => output, exited };
}

/** a whole start on a loaded machine (2 cores, two test runs and a build) can take a minute: behaviour is checked here, not speed */
async function until(check: () => boolean, what: string, ms = 100_000) {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe("npm start", () => {
  const dataDir = mkdtempSync(join(tmpdir(), "core-start-"));
  let env: NodeJS.ProcessEnv;
  let iamUrl: string;

  beforeAll(async () => {
    const [iam, registry, stacks, vault, billing] = [await freePort(), await freePort(), await freePort(), await freePort(), await freePort()];
    iamUrl = `http://127.0.0.1:${iam}`;
    env = {
      CORE_DATA_DIR: dataDir,
      CORE_IAM_PORT: String(iam),
      CORE_BILLING_PORT: String(billing),
      CORE_BILLING_URL: `http://127.0.0.1:${billing}`,
      CORE_PLATFORM_REGISTRY_PORT: String(registry),
      CORE_STACK_REGISTRY_PORT: String(stacks),
      CORE_STACK_REGISTRY_URL: `http://127.0.0.1:${stacks}`,
      CORE_IAM_URL: iamUrl,
      CORE_PLATFORM_REGISTRY_URL: `http://127.0.0.1:${registry}`,
      CORE_VAULT_PORT: String(vault),
      CORE_VAULT_URL: `http://127.0.0.1:${vault}`,
      LOG_LEVEL: "warn",
    };
  });
  // a test that failed half-way must not leave its launcher holding the ports the next test uses
  afterEach(async () => {
    const running = launched.filter((child) => child.exitCode === null && child.signalCode === null);
    await Promise.all(running.map((child) => new Promise((resolve) => (child.once("exit", resolve), child.kill("SIGKILL")))));
  });
  afterAll(() => {
    for (const child of launched) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("runs every service, refuses a second process on the same data dir, shuts down cleanly and keeps the data", async () => {
    const first = start({ ...env, LOG_LEVEL: "info" });
    await until(() => first.output().includes(RUNNING), "the first start");
    // the banner comes once every service has answered a request (DESIGN §10): each one's request
    // line is out before it, and every printed address answers now
    const [beforeBanner, banner] = first.output().split("core is running:\n");
    const printed = [...banner!.matchAll(/^ {2}\S+ +(http:\/\/\S+)$/gm)].map((match) => new URL(match[1]!).origin);
    expect(printed).toHaveLength(5);
    // any HTTP answer counts: on a loaded machine a dependency's check may time out (503)
    const answers = await Promise.all(printed.map(async (origin) => (await fetch(`${origin}/health`, { signal: AbortSignal.timeout(30_000) })).status));
    for (const status of answers) expect([200, 503]).toContain(status);
    const answered = beforeBanner!
      .split("\n")
      .filter((line) => line.startsWith("{") && line.includes('"msg":"request"'))
      .map((line) => JSON.parse(line) as { service: string; path: string });
    for (const service of ["iam", "billing", "stack-registry", "platform-registry", "vault"]) {
      expect(answered.some((line) => line.service === service && line.path === "/health"), `${service} answered before the banner`).toBe(true);
    }
    expect(first.output()).toContain(iamUrl);
    expect(first.output()).toContain(`${env.CORE_VAULT_URL}/mcp`);
    const health = await fetch(`${iamUrl}/health`);
    expect(health.status).toBe(200);
    // billing runs with the rest, its migrations applied: the price list answers without a credential
    expect(first.output()).toContain(env.CORE_BILLING_URL);
    const plans = await fetch(`${env.CORE_BILLING_URL}/plans`);
    expect(((await plans.json()) as { tier: string }[]).map((p) => p.tier)).toEqual(["free", "starter", "growth", "scale"]);
    expect((await fetch(`${env.CORE_BILLING_URL}/health`)).status).toBe(200);

    const signUp = await fetch(`${iamUrl}/api/auth/sign-up/email`, {
      method: "POST",
      headers: { "content-type": "application/json", origin: iamUrl },
      body: JSON.stringify({ email: "kept@example.com", password: "correct-horse-battery", name: "Kept" }),
    });
    expect(signUp.status).toBe(200);

    const second = start(env);
    expect(await second.exited).toBe(1);
    expect(second.output()).toMatch(/data directory .* is in use by another core process/);

    first.child.kill("SIGTERM");
    expect(await first.exited).toBe(0);

    const again = start(env);
    await until(() => again.output().includes(RUNNING), "the restart");
    const signIn = await fetch(`${iamUrl}/api/auth/sign-in/email`, {
      method: "POST",
      headers: { "content-type": "application/json", origin: iamUrl },
      body: JSON.stringify({ email: "kept@example.com", password: "correct-horse-battery" }),
    });
    expect(signIn.status).toBe(200);
    again.child.kill("SIGTERM");
    expect(await again.exited).toBe(0);
  }, 300_000);

  it("runs the vault alone without the database: nothing is opened or locked in the data directory", async () => {
    const alone = mkdtempSync(join(tmpdir(), "core-vault-only-"));
    try {
      const vault = start({ ...env, CORE_DATA_DIR: alone }, ["--only", "vault"]);
      await until(() => vault.output().includes(RUNNING), "the vault alone");
      const response = await fetch(`${env.CORE_VAULT_URL}/mcp`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
      });
      expect(((await response.json()) as { result: { tools: unknown[] } }).result.tools).toHaveLength(11);
      expect(readdirSync(alone).filter((name) => name === "pgdata" || name.endsWith(".lock"))).toEqual([]);
      vault.child.kill("SIGTERM");
      expect(await vault.exited).toBe(0);
    } finally {
      rmSync(alone, { recursive: true, force: true });
    }
  }, 150_000);

  it("explains a configuration problem of a service in one line instead of a stack trace", async () => {
    const alone = mkdtempSync(join(tmpdir(), "core-bad-config-"));
    try {
      const vault = start({ ...env, CORE_DATA_DIR: alone, VAULT_DIR: join(alone, "missing") }, ["--only", "vault"]);
      expect(await vault.exited).toBe(1);
      expect(vault.output()).toContain(`core: VAULT_DIR must name a folder of markdown documents; ${join(alone, "missing")} is not a folder`);
      expect(vault.output()).not.toMatch(/\n\s+at /);
      const loud = start({ ...env, CORE_DATA_DIR: alone, LOG_LEVEL: "loud" }, ["--only", "vault"]);
      expect(await loud.exited).toBe(1);
      expect(loud.output()).toContain('core: LOG_LEVEL must be one of trace, debug, info, warn, error, fatal, silent; got "loud"');
      expect(loud.output()).not.toMatch(/\n\s+at /);
    } finally {
      rmSync(alone, { recursive: true, force: true });
    }
  });

  it("explains a host that is not this machine's, a port in use and a data directory it cannot make in one line, exit 1, no stack trace", async () => {
    const alone = mkdtempSync(join(tmpdir(), "core-bad-start-"));
    const blocker = createServer();
    try {
      // 192.0.2.1 (TEST-NET-1, RFC 5737) is nobody's address
      const foreign = start({ ...env, CORE_DATA_DIR: alone, CORE_HOST: "192.0.2.1" }, ["--only", "vault"]);
      expect(await foreign.exited).toBe(1);
      expect(foreign.output()).toMatch(/^core: listen EADDRNOTAVAIL: address not available 192\.0\.2\.1:\d+\. Check CORE_HOST: it must be an address of this machine\.$/m);
      expect(foreign.output()).not.toMatch(/\n\s+at /);

      await new Promise<void>((resolve, reject) => (blocker.once("error", reject), blocker.listen(Number(env.CORE_VAULT_PORT), "127.0.0.1", resolve)));
      const taken = start({ ...env, CORE_DATA_DIR: alone }, ["--only", "vault"]);
      expect(await taken.exited).toBe(1);
      expect(taken.output()).toContain(`core: listen EADDRINUSE: address already in use 127.0.0.1:${env.CORE_VAULT_PORT}. Another process uses that port; set CORE_<NAME>_PORT or CORE_BASE_PORT to move it.`);
      expect(taken.output()).not.toMatch(/\n\s+at /);

      // a data directory under a file cannot be made
      writeFileSync(join(alone, "a-file"), "");
      const unmade = start({ ...env, CORE_DATA_DIR: join(alone, "a-file", "data") }, ["--only", "iam"]);
      expect(await unmade.exited).toBe(1);
      expect(unmade.output()).toMatch(/^core: ENOTDIR: not a directory, mkdir '.*a-file\/data'\. Check CORE_DATA_DIR and the paths the configuration names\.$/m);
      expect(unmade.output()).not.toMatch(/\n\s+at /);
    } finally {
      blocker.close();
      rmSync(alone, { recursive: true, force: true });
    }
  }, 120_000);

  it("applies migrations and exits with --migrate-only, writing no service secrets", async () => {
    const fresh = mkdtempSync(join(tmpdir(), "core-migrate-"));
    try {
      const migrate = start({ ...env, CORE_DATA_DIR: fresh, LOG_LEVEL: "info" }, ["--migrate-only"]);
      expect(await migrate.exited).toBe(0);
      expect(migrate.output()).toContain("core: migrations applied for iam, billing, stack-registry, platform-registry, vault");
      // every JSON log line names one service: the launcher's, with the service it migrated beside it
      const lines = migrate.output().split("\n").filter((line) => line.startsWith("{"));
      const migrated = lines.filter((line) => line.includes('"migrations applied"'));
      expect(migrated.length).toBeGreaterThanOrEqual(4);
      for (const line of lines) expect(line.match(/"service":/g), line).toHaveLength(1);
      expect(migrated.map((line) => JSON.parse(line).migrated).sort()).toEqual(["billing", "iam", "platform-registry", "stack-registry"]);
      expect(readdirSync(fresh).filter((name) => name.endsWith(".secret"))).toEqual([]);
    } finally {
      rmSync(fresh, { recursive: true, force: true });
    }
  }, 60_000);

  it("names an unknown --only service with the usage line instead of starting: exit 2", async () => {
    const nope = start(env, ["--only", "nope"]);
    expect(await nope.exited).toBe(2);
    expect(nope.output()).toContain('core: unknown service "nope"; choose one of iam, billing, stack-registry, platform-registry, vault\nusage: npm start -- [--only <iam|billing|stack-registry|platform-registry|vault>]');
  });

  it.each([
    [["--bogus"], "core: Unknown option '--bogus'"],
    [["--only"], "core: Option '--only <value>' argument missing"],
    [["iam"], "core: Unexpected argument 'iam'"],
  ])("refuses %j with the usage line on stderr and exit 2, no stack trace", async (args, problem) => {
    const child = spawn(process.execPath, ["scripts/start.mjs", ...args], { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout!.on("data", (d) => (stdout += d));
    child.stderr!.on("data", (d) => (stderr += d));
    const code = await new Promise((resolve) => child.on("exit", resolve));
    expect(code).toBe(2);
    // a rebuild of the launcher may say so on stdout first; nothing else is printed
    expect(stdout.replace(/^core: built in \d+ ms\n/, "")).toBe("");
    expect(stderr).toBe(`${problem}\nusage: npm start -- [--only <iam|billing|stack-registry|platform-registry|vault>] [--replicas <1-32>] [--migrate-only] [--help]\n`);
  });

  it("prints the usage line on stdout with --help, exit 0", async () => {
    const help = start(env, ["--help"]);
    expect(await help.exited).toBe(0);
    expect(help.output()).toContain("usage: npm start -- [--only");
  });
});
