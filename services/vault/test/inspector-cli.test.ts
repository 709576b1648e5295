import { execFile } from "node:child_process";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { makeTestVault, startVaultServer, type TestVault, type VaultServer } from "./support/vault-server.js";

const run = promisify(execFile);

/**
 * The MCP Inspector's CLI mode, as a person would run it (`inspector --cli <url> --transport http …`).
 * Version 1 of the Inspector reads its own package.json relative to the working directory, so it is
 * started from its build folder.
 */
const inspectorBuild = join(dirname(createRequire(import.meta.url).resolve("@modelcontextprotocol/inspector-cli/package.json")), "build");

async function inspector(mcpUrl: string, ...args: string[]): Promise<any> {
  const { stdout } = await run(process.execPath, ["cli.js", "--cli", mcpUrl, "--transport", "http", ...args], {
    cwd: inspectorBuild,
    timeout: 30_000,
  });
  return JSON.parse(stdout.slice(stdout.indexOf("{")));
}

let files: TestVault;
let server: VaultServer;

beforeAll(async () => {
  files = makeTestVault();
  server = await startVaultServer(files.dir);
});
afterAll(async () => {
  await server?.close();
  files?.remove();
});

describe("the MCP Inspector in CLI mode", () => {
  it("lists the 11 tools with their input schemas", async () => {
    const listed = await inspector(server.mcpUrl, "--method", "tools/list");
    expect(listed.tools).toHaveLength(11);
    const search = listed.tools.find((tool: { name: string }) => tool.name === "search_docs");
    expect(search.inputSchema.required).toEqual(["query"]);
    expect(search.annotations.readOnlyHint).toBe(true);
  });

  it("calls search_docs and gets the spec's one text item of search results", async () => {
    const result = await inspector(server.mcpUrl, "--method", "tools/call", "--tool-name", "search_docs", "--tool-arg", "query=tenancy", "--tool-arg", "limit=1");
    expect(result.content).toHaveLength(1);
    expect(result.content[0].type).toBe("text");
    const items = JSON.parse(result.content[0].text);
    expect(items).toHaveLength(1);
    expect(items[0]).toMatchObject({ path: "concepts/tenancy", title: "Tenancy" });
  });

  it("calls get_adr with a number argument", async () => {
    const result = await inspector(server.mcpUrl, "--method", "tools/call", "--tool-name", "get_adr", "--tool-arg", "number=4");
    expect(JSON.parse(result.content[0].text)).toMatchObject({ adr: 4, status: "accepted", path: "decisions/0004-permissions" });
  });

  it("reports a missing document as a tool error", async () => {
    const result = await inspector(server.mcpUrl, "--method", "tools/call", "--tool-name", "read_doc", "--tool-arg", "path=concepts/nowhere");
    expect(result.isError).toBe(true);
    expect(result.content[0].text).toContain("concepts/nowhere");
  });

  it("lists the documents as resources, reads one by its vault:// address, and gets a prompt", async () => {
    const listed = await inspector(server.mcpUrl, "--method", "resources/list");
    expect(listed.resources).toContainEqual(expect.objectContaining({ uri: "vault://services/iam", title: "IAM service" }));
    const read = await inspector(server.mcpUrl, "--method", "resources/read", "--uri", "vault://services/iam");
    expect(read.contents[0].text).toContain("# IAM service");
    const prompt = await inspector(server.mcpUrl, "--method", "prompts/get", "--prompt-name", "explain-service", "--prompt-args", "service=iam");
    expect(prompt.messages[1].content.resource.uri).toBe("vault://services/iam");
  });
});
