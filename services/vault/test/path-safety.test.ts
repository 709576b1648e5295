import { describe, expect, it } from "vitest";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { outputOf, servedVault } from "./support/vault-server.js";

const served = servedVault();

/** Every way of naming the secret file beside the vault. */
const escapes = () => [
  "../outside/secret",
  "../outside/secret.md",
  "services/../../outside/secret",
  `${served.files.outside}/secret`,
  `${served.files.outside}/secret.md`,
  "/etc/passwd",
  "..%2Foutside%2Fsecret",
  "%2e%2e/outside/secret",
  "..\\outside\\secret",
  "guides/leak", // a symlink to the secret file
  "concepts/escape/secret", // a symlinked folder pointing out
  "services/iam\u0000/../../outside/secret",
];

describe("no path outside the vault can be read", () => {
  for (const tool of ["read_doc", "read_section", "get_links"]) {
    it(`${tool}: every escape is a document-not-found tool error, never the file`, async () => {
      for (const path of escapes()) {
        const result = (await served.client.callTool({ name: tool, arguments: { path, heading: "Secret" } }).catch((err) => err)) as CallToolResult | Error;
        const text = JSON.stringify(result instanceof Error ? result.message : result);
        expect(text, path).not.toContain("TOPSECRET");
        if (!(result instanceof Error)) expect(result.isError, path).toBe(true);
      }
    });
  }

  it("never indexes a file reached through a link pointing out", async () => {
    expect(await outputOf(await served.client.callTool({ name: "search_docs", arguments: { query: "TOPSECRET" } }))).toEqual([]);
    expect(served.server.vault.get("guides/leak")).toBeUndefined();
    expect(served.server.vault.all().some((doc) => doc.path.startsWith("concepts/escape"))).toBe(false);
  });

  it("follows a link that stays inside the vault", async () => {
    const doc = outputOf(await served.client.callTool({ name: "read_doc", arguments: { path: "guides/alias" } }));
    expect(doc.content).toContain("Run npm start");
  });
});
