import { rmSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { connectClient, makeTestVault, outputOf, startVaultServer, type TestVault, type VaultServer } from "./support/vault-server.js";

let files: TestVault;
let server: VaultServer;
let client: Client;

beforeAll(async () => {
  files = makeTestVault();
  server = await startVaultServer(files.dir);
  client = await connectClient(server.mcpUrl);
});
afterAll(async () => {
  await client?.close();
  await server?.close();
  files?.remove();
});

const search = async (query: string) =>
  (outputOf(await client.callTool({ name: "search_docs", arguments: { query } })) as { path: string }[]).map((r) => r.path);

/** Polls until the expectation holds: file events arrive asynchronously. */
async function eventually(check: () => Promise<void>, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await check();
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}

describe("the index follows the files without a restart", () => {
  it("finds a document written after start, in a new folder too", async () => {
    expect(await search("quokka")).toEqual([]);
    files.write("guides/new-folder/quokkas.md", "---\ntitle: Quokkas\n---\n# Quokkas\nA quokka smiles.\n");
    await eventually(async () => expect(await search("quokka")).toEqual(["guides/new-folder/quokkas"]));
  });

  it("sees an edited document's new text and drops its old text", async () => {
    files.write("cross-cutting/errors.md", "---\ntitle: Errors\nconcern: errors\n---\n# Errors\nProblem details with a wombat.\n");
    await eventually(async () => expect(await search("wombat")).toEqual(["cross-cutting/errors"]));
    expect(await search("envelope")).not.toContain("cross-cutting/errors");
  });

  it("forgets a deleted document", async () => {
    rmSync(join(files.dir, "guides/running-locally.md"));
    await eventually(async () => {
      const result = await client.callTool({ name: "read_doc", arguments: { path: "guides/running-locally" } });
      expect(result.isError).toBe(true);
    });
  });
});
