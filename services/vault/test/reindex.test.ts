import { renameSync, rmSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { IndexingReport } from "../src/vault.js";
import { eventually, FIXTURE, outputOf, servedVault } from "./support/vault-server.js";

const served = servedVault();

const search = async (query: string) =>
  (outputOf(await served.client.callTool({ name: "search_docs", arguments: { query } })) as { path: string }[]).map((r) => r.path);


describe("the index follows the files without a restart", () => {
  it("finds a document written after start, in a new folder too", async () => {
    expect(await search("quokka")).toEqual([]);
    served.files.write("guides/new-folder/quokkas.md", "---\ntitle: Quokkas\n---\n# Quokkas\nA quokka smiles.\n");
    await eventually(async () => expect(await search("quokka")).toEqual(["guides/new-folder/quokkas"]));
  });

  it("sees an edited document's new text and drops its old text", async () => {
    served.files.write("cross-cutting/errors.md", "---\ntitle: Errors\nconcern: errors\n---\n# Errors\nProblem details with a wombat.\n");
    await eventually(async () => expect(await search("wombat")).toEqual(["cross-cutting/errors"]));
    expect(await search("envelope")).not.toContain("cross-cutting/errors");
  });

  it("forgets a deleted document", async () => {
    rmSync(join(served.files.dir, "guides/running-locally.md"));
    await eventually(async () => {
      const result = await served.client.callTool({ name: "read_doc", arguments: { path: "guides/running-locally" } });
      expect(result.isError).toBe(true);
    });
  });
});

describe("without symlinks in the vault, a changed file is re-read alone", () => {
  const reports: IndexingReport[] = [];
  const plain = servedVault({ symlinks: false, vault: { onIndexed: (report) => reports.push(report) } });

  const call = async (name: string, args: Record<string, unknown>) => outputOf(await plain.client.callTool({ name, arguments: args }));
  const find = async (query: string) => ((await call("search_docs", { query })) as { path: string }[]).map((r) => r.path);
  /** waits for the file events to be indexed and returns the reports they produced */
  const indexed = async (change: () => void): Promise<IndexingReport[]> => {
    const before = reports.length;
    change();
    await eventually(async () => expect(reports.length).toBeGreaterThan(before));
    await plain.server.vault.settled();
    return reports.slice(before);
  };

  it("indexes the whole folder once at start", () => {
    expect(reports[0]).toMatchObject({ kind: "full", documents: Object.keys(FIXTURE).length });
  });

  it("re-reads only an edited document, and its new words are found", async () => {
    const changed = await indexed(() => plain.files.write("concepts/tenancy.md", "---\ntitle: Tenancy\n---\n# Tenancy\nA numbat owns nothing.\n"));
    expect(changed.map((r) => r.kind)).not.toContain("full");
    expect(changed.at(-1)).toMatchObject({ kind: "changed", touched: 1, documents: Object.keys(FIXTURE).length });
    expect(await find("numbat")).toEqual(["concepts/tenancy"]);
    expect(await find("slugs")).not.toContain("concepts/tenancy");
  });

  it("adds a new document in an existing folder and drops a deleted one, one file at a time", async () => {
    const added = await indexed(() => plain.files.write("guides/bilby.md", "---\ntitle: Bilby\n---\n# Bilby\nLinks to [[services/stack-registry]].\n"));
    expect(added.map((r) => r.kind)).not.toContain("full");
    expect(await find("bilby")).toEqual(["guides/bilby"]);
    const inbound = (await call("get_links", { path: "services/stack-registry" })).inbound.map((l: { path: string }) => l.path);
    expect(inbound).toContain("guides/bilby");

    const removed = await indexed(() => rmSync(join(plain.files.dir, "guides/bilby.md")));
    expect(removed.map((r) => r.kind)).not.toContain("full");
    expect(await find("bilby")).toEqual([]);
    const after = (await call("get_links", { path: "services/stack-registry" })).inbound.map((l: { path: string }) => l.path);
    expect(after).not.toContain("guides/bilby");
  });

  it("follows links that are added and taken away by an edit", async () => {
    const linksOf = async () => (await call("get_links", { path: "decisions/0005-principals" })).inbound.map((l: { path: string }) => l.path);
    expect(await linksOf()).toEqual([]);
    await indexed(() => plain.files.write("guides/running-locally.md", "---\ntitle: Running locally\n---\n# Running locally\nSee [[0005-principals]].\n"));
    expect(await linksOf()).toEqual(["guides/running-locally"]);
    await indexed(() => plain.files.write("guides/running-locally.md", "---\ntitle: Running locally\n---\n# Running locally\nNo links.\n"));
    expect(await linksOf()).toEqual([]);
  });

  it("reports a short link as broken once a second document has the same file name", async () => {
    await indexed(() => plain.files.write("guides/running-locally.md", "---\ntitle: Running locally\n---\n# Running locally\nSee [[0005-principals]].\n"));
    await indexed(() => plain.files.write("rules/0005-principals.md", "---\ntitle: Another 0005\n---\n# Another\n"));
    const outbound = (await call("get_links", { path: "guides/running-locally" })).outbound;
    expect(outbound).toEqual([expect.objectContaining({ path: "0005-principals", broken: true })]);
  });

  it("ignores files that are not markdown, such as an editor's temporary file", async () => {
    const before = reports.length;
    plain.files.write("concepts/tenancy.md~", "backup");
    plain.files.write("concepts/.tenancy.md.swp", "swap");
    await new Promise((resolve) => setTimeout(resolve, 300));
    await plain.server.vault.settled();
    expect(reports.slice(before)).toEqual([]);
  });

  it("reads the whole folder again when a folder is renamed, and serves the documents at their new paths", async () => {
    const changed = await indexed(() => renameSync(join(plain.files.dir, "rules"), join(plain.files.dir, "guides", "rules-moved")));
    expect(changed.map((r) => r.kind)).toContain("full");
    expect((await call("read_doc", { path: "guides/rules-moved/security-secrets" })).path).toBe("guides/rules-moved/security-secrets");
    const gone = await plain.client.callTool({ name: "read_doc", arguments: { path: "rules/security-secrets" } });
    expect(gone.isError).toBe(true);
  });

  it("reads the whole folder again when a folder with documents is removed", async () => {
    const changed = await indexed(() => rmSync(join(plain.files.dir, "guides", "rules-moved"), { recursive: true }));
    expect(changed.map((r) => r.kind)).toContain("full");
    expect(plain.server.vault.all().some((doc) => doc.path.startsWith("guides/rules-moved/"))).toBe(false);
  });
});
