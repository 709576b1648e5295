import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { makeTestVault, startVaultServer, type TestVault, type VaultServer } from "./support/vault-server.js";

/**
 * The MCP Inspector's CLI mode as `npm run inspector` runs it: the `inspector` command of
 * `@modelcontextprotocol/inspector` with `--cli` first (`inspector --cli <url> --transport http …`).
 * It keeps its state (catalog, OAuth tokens, secrets) under HOME: this file gives it a HOME of its
 * own and the file secret store, never the user's folder or keychain.
 */
const packageJson = createRequire(import.meta.url).resolve("@modelcontextprotocol/inspector/package.json");
const launcher = join(dirname(packageJson), JSON.parse(readFileSync(packageJson, "utf8")).bin.inspector);

let home: string;

/** One run of the Inspector: its exit code and what it printed (the result, as JSON, on stdout). */
function inspector(mcpUrl: string, ...args: string[]) {
  return new Promise<{ code: number; stdout: string; stderr: string }>((resolve) =>
    execFile(
      process.execPath,
      [launcher, "--cli", mcpUrl, "--transport", "http", ...args],
      { env: { ...process.env, HOME: home, MCP_INSPECTOR_SECRET_STORE: "file" }, timeout: 30_000 },
      (error, stdout, stderr) => resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
    ),
  );
}

/** The result of a run that succeeded. */
async function answer(mcpUrl: string, ...args: string[]): Promise<any> {
  const done = await inspector(mcpUrl, ...args);
  expect(done.code, done.stderr).toBe(0);
  return JSON.parse(done.stdout);
}

let files: TestVault;
let server: VaultServer;

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), "inspector-home-"));
  files = makeTestVault();
  server = await startVaultServer(files.dir);
});
afterAll(async () => {
  await server?.close();
  files?.remove();
  if (home) rmSync(home, { recursive: true, force: true });
});

describe("the MCP Inspector in CLI mode", () => {
  it("lists the 11 tools with their input schemas", async () => {
    const listed = await answer(server.mcpUrl, "--method", "tools/list");
    expect(listed.tools).toHaveLength(11);
    const search = listed.tools.find((tool: { name: string }) => tool.name === "search_docs");
    expect(search.inputSchema.required).toEqual(["query"]);
    expect(search.annotations.readOnlyHint).toBe(true);
  });

  it("calls search_docs and gets the spec's one text item of search results", async () => {
    const result = await answer(server.mcpUrl, "--method", "tools/call", "--tool-name", "search_docs", "--tool-arg", "query=tenancy", "--tool-arg", "limit=1");
    expect(result.content).toHaveLength(1);
    expect(result.content[0].type).toBe("text");
    const items = JSON.parse(result.content[0].text);
    expect(items).toHaveLength(1);
    expect(items[0]).toMatchObject({ path: "concepts/tenancy", title: "Tenancy" });
  });

  it("calls get_adr with a number argument", async () => {
    const result = await answer(server.mcpUrl, "--method", "tools/call", "--tool-name", "get_adr", "--tool-arg", "number=4");
    expect(JSON.parse(result.content[0].text)).toMatchObject({ adr: 4, status: "accepted", path: "decisions/0004-permissions" });
  });

  it("reports a missing document as a tool error: the result on stdout, exit code 5 and tool_is_error on stderr", async () => {
    const done = await inspector(server.mcpUrl, "--method", "tools/call", "--tool-name", "read_doc", "--tool-arg", "path=concepts/nowhere");
    expect(done.code).toBe(5);
    expect(JSON.parse(done.stderr).error.code).toBe("tool_is_error");
    const result = JSON.parse(done.stdout);
    expect(result.isError).toBe(true);
    expect(result.content[0].text).toContain("concepts/nowhere");
  });

  it("lists the documents as resources, reads one by its vault:// address, and gets a prompt", async () => {
    const listed = await answer(server.mcpUrl, "--method", "resources/list");
    expect(listed.resources).toContainEqual(expect.objectContaining({ uri: "vault://services/iam", title: "IAM service" }));
    const read = await answer(server.mcpUrl, "--method", "resources/read", "--uri", "vault://services/iam");
    expect(read.contents[0].text).toContain("# IAM service");
    const prompt = await answer(server.mcpUrl, "--method", "prompts/get", "--prompt-name", "explain-service", "--prompt-args", "service=iam");
    expect(prompt.messages[1].content.resource.uri).toBe("vault://services/iam");
  });
});
