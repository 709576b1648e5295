import { execFile } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { buildSync } from "esbuild";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ConfigError, loadCommonConfig, persistentSecret } from "@core/kit";

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
