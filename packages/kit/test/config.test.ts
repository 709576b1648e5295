import { execFile } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { buildSync } from "esbuild";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ConfigError, loadCommonConfig, persistentSecret, SERVICES, type ServiceName } from "@core/kit";

/** The error loadCommonConfig throws for this environment, or undefined. */
function failureOf(env: NodeJS.ProcessEnv): unknown {
  try {
    loadCommonConfig(env);
  } catch (err) {
    return err;
  }
  return undefined;
}

describe("loadCommonConfig", () => {
  it("defaults to localhost, ./.data, the embedded database and the ports of DESIGN §1", () => {
    const config = loadCommonConfig({});
    expect(config.host).toBe("127.0.0.1");
    expect(config.dataDir).toBe(resolve("./.data"));
    expect(config.databaseUrl).toBeUndefined();
    expect(config.port("iam")).toBe(4100);
    expect(config.port("platform-registry")).toBe(4400);
    expect(config.url("iam")).toBe("http://localhost:4100");
    expect(config.url("billing")).toBe("http://localhost:4200");
  });

  it("reads host, data dir, ports and addresses from the environment", () => {
    const config = loadCommonConfig({
      CORE_HOST: "0.0.0.0",
      CORE_DATA_DIR: "/var/lib/core",
      CORE_PLATFORM_REGISTRY_PORT: "5400",
      CORE_IAM_URL: "https://iam.example.com/",
      CORE_MCP_URL: "https://vault.example.com/mcp",
      DATABASE_URL: "postgresql://core@db.example.com:5432/core",
    });
    expect(config.host).toBe("0.0.0.0");
    expect(config.dataDir).toBe("/var/lib/core");
    expect(config.databaseUrl).toBe("postgresql://core@db.example.com:5432/core");
    expect(config.port("platform-registry")).toBe(5400);
    expect(config.url("platform-registry")).toBe("http://localhost:5400");
    expect(config.url("iam")).toBe("https://iam.example.com");
    expect(config.url("vault")).toBe("https://vault.example.com");
  });

  it("accepts the port bounds 0 and 65535", () => {
    expect(loadCommonConfig({ CORE_IAM_PORT: "0" }).port("iam")).toBe(0);
    expect(loadCommonConfig({ CORE_IAM_PORT: "65535" }).port("iam")).toBe(65535);
  });

  it.each(["65536", "-1", "http", "80.5"])("refuses CORE_IAM_PORT=%s at load time with a ConfigError naming it", (raw) => {
    const err = failureOf({ CORE_IAM_PORT: raw });
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toBe(`CORE_IAM_PORT must be a port number (0-65535), got "${raw}"`);
  });

  it("refuses a bad port even when the service's address is configured", () => {
    const err = failureOf({ CORE_BILLING_URL: "http://billing:4200", CORE_BILLING_PORT: "99999" });
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toContain("CORE_BILLING_PORT");
  });

  it.each(["mysql://root@localhost/core", "localhost:5432", "postgres:/missing-slash"])(
    "refuses DATABASE_URL=%s with a ConfigError saying what it must be",
    (url) => {
      const err = failureOf({ DATABASE_URL: url });
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as Error).message).toBe("DATABASE_URL must be a postgres:// or postgresql:// URL");
    },
  );

  it("accepts both postgres:// and postgresql:// URLs", () => {
    expect(loadCommonConfig({ DATABASE_URL: "postgres://u@h/db" }).databaseUrl).toBe("postgres://u@h/db");
    expect(loadCommonConfig({ DATABASE_URL: "postgresql://u@h/db" }).databaseUrl).toBe("postgresql://u@h/db");
  });

  it("refuses an address that is not a URL with a ConfigError naming the variable", () => {
    const err = failureOf({ CORE_IAM_URL: "iam.example.com" });
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toBe('CORE_IAM_URL must be a URL, got "iam.example.com"');
    expect((failureOf({ CORE_REGISTRY_URL: "registry" }) as Error).message).toBe('CORE_REGISTRY_URL must be a URL, got "registry"');
  });

  it("names every service's settings CORE_<SERVICE>_PORT and CORE_<SERVICE>_URL (DESIGN §10)", () => {
    expect(Object.entries(SERVICES).map(([name, spec]) => [name, spec.portVar, spec.urlVar])).toEqual([
      ["iam", "CORE_IAM_PORT", "CORE_IAM_URL"],
      ["billing", "CORE_BILLING_PORT", "CORE_BILLING_URL"],
      ["stack-registry", "CORE_STACK_REGISTRY_PORT", "CORE_STACK_REGISTRY_URL"],
      ["platform-registry", "CORE_PLATFORM_REGISTRY_PORT", "CORE_PLATFORM_REGISTRY_URL"],
      ["vault", "CORE_VAULT_PORT", "CORE_VAULT_URL"],
    ]);
    const config = loadCommonConfig({
      CORE_IAM_URL: "https://iam.example.com",
      CORE_BILLING_URL: "https://billing.example.com",
      CORE_STACK_REGISTRY_URL: "https://stacks.example.com",
      CORE_PLATFORM_REGISTRY_URL: "https://registry.example.com/",
      CORE_VAULT_URL: "https://vault.example.com/mcp",
    });
    expect((Object.keys(SERVICES) as ServiceName[]).map((name) => config.url(name))).toEqual([
      "https://iam.example.com",
      "https://billing.example.com",
      "https://stacks.example.com",
      "https://registry.example.com",
      "https://vault.example.com",
    ]);
  });

  it("still reads the former names CORE_REGISTRY_URL and CORE_MCP_URL; the new name wins when both are set", () => {
    const former = loadCommonConfig({ CORE_REGISTRY_URL: "https://old-registry.example.com", CORE_MCP_URL: "https://old-vault.example.com/mcp" });
    expect(former.url("platform-registry")).toBe("https://old-registry.example.com");
    expect(former.url("vault")).toBe("https://old-vault.example.com");
    const both = loadCommonConfig({
      CORE_REGISTRY_URL: "https://old-registry.example.com",
      CORE_PLATFORM_REGISTRY_URL: "https://registry.example.com",
      CORE_MCP_URL: "https://old-vault.example.com/mcp",
      CORE_VAULT_URL: "https://vault.example.com/mcp",
    });
    expect(both.url("platform-registry")).toBe("https://registry.example.com");
    expect(both.url("vault")).toBe("https://vault.example.com");
    // an empty new name counts as unset
    expect(loadCommonConfig({ CORE_PLATFORM_REGISTRY_URL: "", CORE_REGISTRY_URL: "https://old-registry.example.com" }).url("platform-registry")).toBe("https://old-registry.example.com");
  });

  it("puts a second copy elsewhere with one knob: CORE_BASE_PORT=n gives IAM n, billing n+100 … the vault n+400", () => {
    const config = loadCommonConfig({ CORE_BASE_PORT: "5100" });
    expect((Object.keys(SERVICES) as ServiceName[]).map((name) => config.port(name))).toEqual([5100, 5200, 5300, 5400, 5500]);
    expect(config.url("billing")).toBe("http://localhost:5200");
    expect(config.url("vault")).toBe("http://localhost:5500");
    // the default keeps today's ports
    const usual = loadCommonConfig({});
    expect((Object.keys(SERVICES) as ServiceName[]).map((name) => usual.port(name))).toEqual([4100, 4200, 4300, 4400, 4500]);
  });

  it("lets an explicit port or address win over CORE_BASE_PORT", () => {
    const config = loadCommonConfig({ CORE_BASE_PORT: "5100", CORE_BILLING_PORT: "7000", CORE_IAM_URL: "https://iam.example.com" });
    expect(config.port("billing")).toBe(7000);
    expect(config.url("billing")).toBe("http://localhost:7000");
    expect(config.port("iam")).toBe(5100);
    expect(config.url("iam")).toBe("https://iam.example.com");
  });

  it("accepts CORE_BASE_PORT from 1 to 65135, so the vault's n+400 is still a port", () => {
    expect(loadCommonConfig({ CORE_BASE_PORT: "1" }).port("iam")).toBe(1);
    expect(loadCommonConfig({ CORE_BASE_PORT: "65135" }).port("vault")).toBe(65535);
  });

  it.each(["0", "65136", "-5", "51x0", "4100.5"])("refuses CORE_BASE_PORT=%s with a ConfigError naming it", (raw) => {
    const err = failureOf({ CORE_BASE_PORT: raw });
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toBe(`CORE_BASE_PORT must be a port number (1-65135), got "${raw}"`);
  });

  it("waits 60 s for the database by default; CORE_DB_WAIT_SECONDS sets it, 0 included (one try)", () => {
    expect(loadCommonConfig({}).databaseWaitSeconds).toBe(60);
    expect(loadCommonConfig({ CORE_DB_WAIT_SECONDS: "0" }).databaseWaitSeconds).toBe(0);
    expect(loadCommonConfig({ CORE_DB_WAIT_SECONDS: "300" }).databaseWaitSeconds).toBe(300);
  });

  it("lets a query wait 5 s for a pooled connection by default; CORE_DB_POOL_WAIT_SECONDS sets it, and refuses 0 or words", () => {
    expect(loadCommonConfig({}).databasePoolWaitSeconds).toBe(5);
    expect(loadCommonConfig({ CORE_DB_POOL_WAIT_SECONDS: "60" }).databasePoolWaitSeconds).toBe(60);
    for (const raw of ["0", "five", "601"]) {
      expect((failureOf({ CORE_DB_POOL_WAIT_SECONDS: raw }) as Error).message).toBe(`CORE_DB_POOL_WAIT_SECONDS must be a number of seconds (1-600), got "${raw}"`);
    }
  });

  it.each(["-1", "ten", "1.5", "86401"])("refuses CORE_DB_WAIT_SECONDS=%s with a ConfigError naming it", (raw) => {
    const err = failureOf({ CORE_DB_WAIT_SECONDS: raw });
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toBe(`CORE_DB_WAIT_SECONDS must be a number of seconds (0-86400), got "${raw}"`);
  });
});

describe("persistentSecret", () => {
  const root = mkdtempSync(join(tmpdir(), "core-secret-"));
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it("creates the data dir (0700) and the secret file with mode 0600", () => {
    const dir = join(root, "fresh", "data");
    const secret = persistentSecret(dir, "auth");
    expect(secret).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    const file = join(dir, "auth.secret");
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(readFileSync(file, "utf8").trim()).toBe(secret);
  });

  it("answers the same secret on every later call, and a different one per name", () => {
    const dir = join(root, "kept");
    const first = persistentSecret(dir, "service-iam");
    expect(persistentSecret(dir, "service-iam")).toBe(first);
    expect(persistentSecret(dir, "service-billing")).not.toBe(first);
  });

  it("gives processes starting together one secret, each read whole, and leaves no draft behind", async () => {
    const dir = join(root, "raced");
    // the kit's own code, bundled for plain node processes
    const entry = join(root, "raced-entry.mjs");
    const entrySource = `import { persistentSecret } from ${JSON.stringify(fileURLToPath(new URL("../src/config.ts", import.meta.url)))};
process.stdout.write(persistentSecret(process.argv[2], "auth"));`;
    buildSync({ stdin: { contents: entrySource, resolveDir: root, loader: "ts" }, bundle: true, platform: "node", format: "esm", outfile: entry, logLevel: "silent" });
    // twelve processes at once, as replicas starting together: each prints the secret it got
    const answers = await Promise.all(
      Array.from(
        { length: 12 },
        () => new Promise<string>((resolve, reject) => execFile(process.execPath, [entry, dir], (err, stdout) => (err ? reject(err) : resolve(stdout)))),
      ),
    );
    expect(new Set(answers).size).toBe(1);
    expect(answers[0]).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(readdirSync(dir)).toEqual(["auth.secret"]);
  });

  it("refuses an empty secret file instead of signing with an empty secret", () => {
    const dir = join(root, "empty");
    persistentSecret(dir, "other");
    writeFileSync(join(dir, "auth.secret"), "\n", { mode: 0o600 });
    expect(() => persistentSecret(dir, "auth")).toThrow(ConfigError);
    expect(() => persistentSecret(dir, "auth")).toThrow(/auth\.secret is empty/);
  });
});
