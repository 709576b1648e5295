import { execFile } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { freePort } from "../../../services/iam/test/support/harness.js";
import { freshHome, removeScratchDirs, repoRoot, runCli, scratchDir } from "./support/cli.js";

const run = promisify(execFile);
const cliDir = join(repoRoot, "packages/cli");
// npm's own settings from `npm test` (prefix, global …) must not leak into these npm runs
const npmEnv = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.toLowerCase().startsWith("npm_")));
const npm = (args: string[], cwd: string) => run("npm", args, { cwd, env: npmEnv });

/** The CLI as users get it: `npm pack`, installed outside the repository, and `npx core` inside it. */
describe("the core package", () => {
  afterAll(removeScratchDirs);

  it("npm pack gives a tarball that installs a working core outside the repository", async () => {
    const out = scratchDir("pack");
    // `npm pack` runs prepare and prepack (scripts/cli-pack.mjs), which bundle dist/core.js and pack a manifest without scripts
    const { stdout } = await npm(["pack", "--json", "--pack-destination", out], cliDir);
    const packed = JSON.parse(stdout.slice(stdout.indexOf("[")))[0];
    expect(packed.files.map((f: { path: string }) => f.path).sort()).toEqual(["README.md", "dist/core.js", "package.json"]);
    expect(packed.files.find((f: { path: string }) => f.path === "dist/core.js").mode & 0o111).not.toBe(0);

    const prefix = scratchDir("install");
    await npm(["install", "--global", "--prefix", prefix, "--offline", "--no-audit", "--no-fund", join(out, packed.filename)], tmpdir());
    const installed = join(prefix, "lib/node_modules/@core/cli");
    expect(readdirSync(installed).sort()).toEqual(["README.md", "dist", "package.json"]);
    // the repository's build scripts stay in the repository: the shipped manifest has none
    const shipped = JSON.parse(readFileSync(join(installed, "package.json"), "utf8"));
    expect(shipped.scripts).toBeUndefined();
    expect(shipped).toMatchObject({ name: "@core/cli", version: packed.version, bin: { core: "dist/core.js" } });
    // and packing left the repository's own manifest as it was
    expect(JSON.parse(readFileSync(join(cliDir, "package.json"), "utf8")).scripts.prepare).toBe("node ../../scripts/build.mjs --cli");
    expect(readdirSync(cliDir)).not.toContain("package.json.repository");

    const core = join(prefix, "bin/core");
    const version = await run(core, ["--version"]);
    expect(version.stdout.trim()).toBe(packed.version);
    const home = freshHome();
    const closed = `http://127.0.0.1:${await freePort()}`;
    const login = await run(core, ["login", "--token", "ci-token", "--iam-url", closed], { env: { PATH: process.env.PATH, CORE_HOME: home } });
    expect(login.stdout).toBe("Authenticated via token\n");
    const status = await run(core, ["status", "--json"], { env: { PATH: process.env.PATH, CORE_HOME: home } });
    expect(JSON.parse(status.stdout)).toMatchObject({ source: "file", email: "ci-user", iamUrl: closed });
  }, 120_000);

  it("declares no dependencies: the bundle is all it needs", () => {
    const manifest = JSON.parse(readFileSync(join(cliDir, "package.json"), "utf8"));
    expect(manifest.dependencies).toBeUndefined();
    expect(manifest.bin).toEqual({ core: "dist/core.js" });
  });

  it("runs inside the repository as npx core", async () => {
    const help = await run("npx", ["--no", "core", "help"], { cwd: repoRoot, env: npmEnv });
    expect(help.stdout).toMatch(/^core \d+\.\d+\.\d+: sign in to the Core control plane/);
    const separated = await run("npx", ["--no", "--", "core", "--help"], { cwd: repoRoot, env: npmEnv });
    expect(separated.stdout).toBe(help.stdout);
    const done = await run("npx", ["--no", "core", "status"], { cwd: repoRoot, env: { ...npmEnv, CORE_HOME: freshHome() } }).catch((e) => e);
    expect(done.code).toBe(1);
    expect(done.stderr).toContain("Not logged in");
  }, 60_000);

  it("core --help, core <command> --help and core --version answer without touching anything", async () => {
    const core = join(cliDir, "dist/core.js");
    const help = await runCli(core, ["--help"]);
    expect(help.code).toBe(0);
    for (const command of ["login", "logout", "whoami", "status", "token", "org", "stacks", "billing"]) expect(help.stdout).toContain(`  ${command} `);
    for (const variable of ["CORE_TOKEN", "CORE_IAM_URL", "CORE_HOME", "CORE_LOGIN_TIMEOUT_SECONDS", "CORE_DEBUG"]) expect(help.stdout).toContain(variable);
    expect((await runCli(core, ["login", "--help"])).stdout).toMatch(/^Usage: core login \[--token <token> \| --token -\] \[--iam-url <url>\]/);
    expect((await runCli(core, ["frobnicate"])).stderr).toBe('Unknown command "frobnicate". Run: core --help\n');
    // a near miss names the command it most likely meant
    const suggestions: [string[], string][] = [
      [["stack", "list"], 'Unknown command "stack". Did you mean: core stacks? Run: core --help\n'],
      [["logn"], 'Unknown command "logn". Did you mean: core login? Run: core --help\n'],
      [["whoamii"], 'Unknown command "whoamii". Did you mean: core whoami? Run: core --help\n'],
      [["invoices"], 'Unknown command "invoices". Did you mean: core billing invoices? Run: core --help\n'],
      [["stacks", "lsit"], 'Unknown command "stacks lsit". Did you mean: core stacks list? Run: core stacks --help\n'],
      [["billing", "upgrde", "growth"], 'Unknown command "billing upgrde". Did you mean: core billing upgrade? Run: core billing --help\n'],
      [["org", "swtich", "acme"], 'Unknown command "org swtich". Did you mean: core org switch? Run: core org --help\n'],
    ];
    for (const [args, message] of suggestions) {
      const done = await runCli(core, args);
      expect(done.code, args.join(" ")).toBe(1);
      expect(done.stderr).toBe(message);
    }
    expect((await runCli(core, ["whoami", "--token", "x"])).stderr).toBe("Unknown option --token. Run: core whoami --help\n");
  });
});
