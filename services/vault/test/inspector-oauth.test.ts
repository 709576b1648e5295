import { mkdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { CoreProcess, removeScratchDirs, scratchDir } from "../../../packages/cli/test/support/cli.js";
import { freePort } from "../../iam/test/support/harness.js";
import { Browsers, hasChromium, requireBrowserOrSkip, SCREENSHOTS } from "../../../test/support/chromium.js";
import { apiKeyOf, launchProtectedSystem, personWithOrganization, signInAndAllow, type Person, type ProtectedSystem } from "./support/protected-vault.js";

/**
 * The MCP Inspector (`@modelcontextprotocol/inspector`, a devDependency) against the protected vault
 * (issue 29), as a person runs it from a terminal: `inspector --cli …`, as `npm run inspector` does.
 *
 * - With a credential given as a header (a session token as a bearer token, an API key as
 *   x-api-key), the path scripts and CI take: no sign-in is started.
 * - Without one it runs the whole OAuth flow: in CLI mode with discovery, registration, a loopback
 *   callback listener and the authorization in a browser (here Chromium, driven by the test), its
 *   token stored so that a second run needs no browser; in its web interface by sending the page
 *   itself through IAM's sign-in and consent.
 */
const packageJson = createRequire(import.meta.url).resolve("@modelcontextprotocol/inspector/package.json");
/** the `inspector` command of the package: `--cli` for CLI mode, `--web` for its web interface */
const launcher = join(dirname(packageJson), JSON.parse(readFileSync(packageJson, "utf8")).bin.inspector);

requireBrowserOrSkip();

let system: ProtectedSystem;
let person: Person;

beforeAll(async () => {
  system = await launchProtectedSystem();
  person = await personWithOrganization(system.iamUrl, "inspector");
}, 120_000);
afterAll(async () => {
  await system?.stop();
  removeScratchDirs();
});

const searchArgs = ["--method", "tools/call", "--tool-name", "search_docs", "--tool-arg", "query=tenancy", "--tool-arg", "limit=1"];

/** The one text item of a tools/call result the Inspector printed, decoded. */
const itemsOf = (result: { content: { text: string }[] }) => JSON.parse(result.content[0]!.text) as { path: string }[];

/** every Inspector process started, so one a failed test left running is stopped */
const started: CoreProcess[] = [];
const start = (...args: ConstructorParameters<typeof CoreProcess>) => {
  const inspectorProcess = new CoreProcess(...args);
  started.push(inspectorProcess);
  return inspectorProcess;
};
afterEach(() => {
  for (const { child } of started.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill();
});

/**
 * The Inspector's CLI with its state in scratch folders (HOME too), never the user's keychain.
 * Standard input is not a terminal here: MCP_AUTO_OPEN_ENABLED=true lets it start the interactive
 * flow anyway, and BROWSER=true makes the browser it opens a no-op (the test's Chromium is the
 * browser).
 */
const inspector = (storageDir: string, args: string[]) =>
  start(launcher, ["--cli", system.mcpUrl, "--format", "json", ...args], {
    env: {
      MCP_STORAGE_DIR: storageDir,
      MCP_INSPECTOR_SECRET_STORE: "file",
      MCP_CATALOG_PATH: join(storageDir, "mcp.json"),
      MCP_CLIENT_CONFIG_PATH: join(storageDir, "client.json"),
      MCP_AUTO_OPEN_ENABLED: "true",
      BROWSER: "true",
    },
  });

describe("the Inspector's CLI with a credential as a header, or none", { timeout: 60_000 }, () => {
  it("calls search_docs with the CLI's session token as a bearer token, and starts no sign-in", async () => {
    const done = await inspector(scratchDir("inspector-token"), [...searchArgs, "--header", `Authorization: Bearer ${person.token}`]).finished;
    expect(done.code, done.stderr).toBe(0);
    expect(itemsOf(JSON.parse(done.stdout).result)[0]!.path).toBe("concepts/tenancy");
    expect(done.stderr).not.toContain("Please navigate to");
  });

  it("calls search_docs with an API key as x-api-key, as every service takes one, and starts no sign-in", async () => {
    const key = await apiKeyOf(system.iamUrl, person);
    const done = await inspector(scratchDir("inspector-key"), [...searchArgs, "--header", `x-api-key: ${key}`]).finished;
    expect(done.code, done.stderr).toBe(0);
    expect(itemsOf(JSON.parse(done.stdout).result)[0]!.path).toBe("concepts/tenancy");
    expect(done.stderr).not.toContain("Please navigate to");
  });

  it("without a credential or a stored token, --stored-auth-only refuses with auth_required (exit 3) and opens nothing", async () => {
    const done = await inspector(scratchDir("inspector-empty"), [...searchArgs, "--stored-auth-only"]).finished;
    expect(done.code).toBe(3);
    expect(done.stdout + done.stderr).toContain("auth_required");
    expect(done.stderr).not.toContain("Please navigate to");
  });

  it("with a wrong API key, is refused: the vault's UNAUTHENTICATED in the Inspector's auth_required (exit 3)", async () => {
    const done = await inspector(scratchDir("inspector-wrong-key"), [...searchArgs, "--header", "x-api-key: core_wrong", "--stored-auth-only"]).finished;
    expect(done.code).toBe(3);
    expect(done.stdout).toBe("");
    const { error } = JSON.parse(done.stderr) as { error: { code: string; message: string } };
    expect(error.code).toBe("auth_required");
    expect(error.message).toContain('"code":"UNAUTHENTICATED"');
    expect(error.message).toContain("Invalid API key");
  });
});

describe.skipIf(!hasChromium)("the Inspector through OAuth, in CLI mode and in its web interface", { timeout: 120_000 }, () => {
  const browsers = new Browsers();
  /** where the Inspector keeps its registration and tokens between runs */
  const storage = scratchDir("inspector-storage");
  // one Chromium at a time: each test's browser is closed when it ends
  afterEach(() => browsers.close());

  it("discovers IAM, registers, has the person sign in and allow in the browser, then calls search_docs", async () => {
    const callback = `http://127.0.0.1:${await freePort()}/oauth/callback`;
    const run = inspector(storage, [...searchArgs, "--callback-url", callback]);
    const [, address] = await run.waitFor(/Please navigate to: (\S+)/, 60_000);
    const authorization = new URL(address!);
    expect(authorization.origin).toBe(system.iamUrl);
    expect(authorization.searchParams.get("code_challenge_method")).toBe("S256");
    expect(authorization.searchParams.get("redirect_uri")).toBe(callback);
    expect(authorization.searchParams.get("resource")).toBe(system.mcpUrl);

    const page = await browsers.fresh();
    await page.goto(authorization.href);
    await signInAndAllow(page, person);
    const done = await run.finished;
    expect(done.code, done.stderr).toBe(0);
    expect(itemsOf(JSON.parse(done.stdout).result)[0]!.path).toBe("concepts/tenancy");
  });

  it("uses the stored token on the next run, with no browser (--stored-auth-only)", async () => {
    const done = await inspector(storage, [...searchArgs, "--stored-auth-only"]).finished;
    expect(done.code, done.stderr).toBe(0);
    expect(itemsOf(JSON.parse(done.stdout).result)[0]!.path).toBe("concepts/tenancy");
  });

  it("in the web interface: connecting sends the browser through sign-in and consent, and back connected", async () => {
    const clientPort = await freePort();
    const web = start(launcher, ["--web", "--server-url", system.mcpUrl, "--transport", "http"], {
      env: {
        MCP_STORAGE_DIR: scratchDir("inspector-web"),
        MCP_INSPECTOR_SECRET_STORE: "file",
        MCP_AUTO_OPEN_ENABLED: "false",
        CLIENT_PORT: String(clientPort),
        MCP_SANDBOX_PORT: String(await freePort()),
        MCP_APP_ORIGIN_PORT: String(await freePort()),
      },
    });
    // the address it prints carries the token that guards its local API
    const [address] = await web.waitFor(new RegExp(`http://127\\.0\\.0\\.1:${clientPort}/?\\?MCP_INSPECTOR_API_TOKEN=\\w+`), 60_000);
    const page = await browsers.fresh({ width: 1400, height: 900 });
    await page.goto(address!);
    // its connect switch is drawn over by its own track: checked directly
    await page.getByRole("switch", { name: `Connect or disconnect "${new URL(system.mcpUrl).host}"` }).check({ force: true });
    await page.waitForURL((url) => url.origin === system.iamUrl);
    await signInAndAllow(page, person);
    await page.waitForURL((url) => url.origin === `http://127.0.0.1:${clientPort}`);
    await page.getByText("Authorization complete", { exact: true }).waitFor();
    await page.getByText("Connected", { exact: true }).waitFor();
    // the vault's own name, from its answer to initialize: the token was accepted
    await page.getByText("core-vault", { exact: true }).waitFor();
    await page.getByText("Tools", { exact: true }).click();
    await page.getByText("search_docs", { exact: true }).first().waitFor();
    // the Inspector's own page, photographed for a reviewer but not held to our pages' checks (look)
    mkdirSync(SCREENSHOTS, { recursive: true });
    await page.screenshot({ path: join(SCREENSHOTS, "inspector-web-connected.png") });
  });
});
