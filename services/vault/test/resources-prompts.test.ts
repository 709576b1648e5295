import { describe, expect, it } from "vitest";
import { ErrorCode } from "@modelcontextprotocol/sdk/types.js";
import { RESOURCE_PAGE_SIZE } from "../src/resources.js";
import { rawRpc, servedVault } from "./support/vault-server.js";

/** More documents than one page of resources/list holds, in a nested folder. */
const NOTES = RESOURCE_PAGE_SIZE + 20;
const served = servedVault({
  prepare: (files) => {
    for (let i = 1; i <= NOTES; i++) files.write(`implementation/notes/note-${String(i).padStart(3, "0")}.md`, `---\ntitle: Note ${i}\nsummary: Note number ${i}.\n---\n# Note ${i}\nPart ${i}.\n`);
  },
});

describe("the vault's documents as resources", () => {
  it("lists every document a page at a time, in path order, with its title, summary and type", async () => {
    const first = await served.client.listResources();
    expect(first.resources).toHaveLength(RESOURCE_PAGE_SIZE);
    expect(first.nextCursor).toEqual(expect.any(String));
    const second = await served.client.listResources({ cursor: first.nextCursor });
    expect(second.nextCursor).toBeUndefined();
    const all = [...first.resources, ...second.resources];
    expect(all).toHaveLength(served.server.vault.size);
    const paths = all.map((r) => r.name);
    expect(paths).toEqual([...paths].sort());
    expect(new Set(paths).size).toBe(paths.length);
    expect(all.find((r) => r.name === "services/iam")).toEqual({
      uri: "vault://services/iam",
      name: "services/iam",
      title: "IAM service",
      description: "Identity and access for every tenant.",
      mimeType: "text/markdown",
    });
  });

  it("refuses an edited cursor with invalid params, not a page", async () => {
    for (const cursor of ["not-a-cursor", Buffer.from('{"after":5}').toString("base64url"), Buffer.from("[]").toString("base64url")]) {
      await expect(served.client.listResources({ cursor })).rejects.toMatchObject({ code: ErrorCode.InvalidParams, message: expect.stringContaining("Invalid cursor") });
    }
  });

  it("reads a document below a folder through the vault://{+path} template", async () => {
    const read = await served.client.readResource({ uri: "vault://implementation/notes/note-007" });
    expect(read.contents).toEqual([{ uri: "vault://implementation/notes/note-007", mimeType: "text/markdown", text: "# Note 7\nPart 7.\n" }]);
    const templates = await served.client.listResourceTemplates();
    expect(templates.resourceTemplates).toEqual([expect.objectContaining({ uriTemplate: "vault://{+path}", name: "vault-document", mimeType: "text/markdown" })]);
  });

  it("answers a document that does not exist with the specification's resource-not-found error", async () => {
    await expect(served.client.readResource({ uri: "vault://services/nowhere" })).rejects.toMatchObject({ code: -32002, message: expect.stringContaining("vault://services/nowhere") });
    // a path escaping the vault names nothing either
    await expect(served.client.readResource({ uri: "vault://../../etc/passwd" })).rejects.toMatchObject({ code: -32002 });
    // a broken percent-encoding is a bad request
    const broken = await rawRpc(served.server.mcpUrl, "resources/read", { uri: "vault://services/%E0%A4%A" });
    expect(broken.body.error.code).toBe(ErrorCode.InvalidParams);
  });

  it("completes a document path from its beginning", async () => {
    const completed = await served.client.complete({ ref: { type: "ref/resource", uri: "vault://{+path}" }, argument: { name: "path", value: "services/" } });
    expect(completed.completion.values).toEqual(expect.arrayContaining(["services/iam", "services/stack-registry"]));
    expect(completed.completion.values.every((v) => v.startsWith("services/"))).toBe(true);
  });
});

describe("the vault's prompts", () => {
  it("lists explain-service and which-decision with their arguments", async () => {
    const { prompts } = await served.client.listPrompts();
    expect(prompts.map((p) => p.name).sort()).toEqual(["explain-service", "which-decision"]);
    expect(prompts.find((p) => p.name === "explain-service")!.arguments).toEqual([expect.objectContaining({ name: "service", required: true })]);
  });

  it("explain-service embeds the service's document", async () => {
    const prompt = await served.client.getPrompt({ name: "explain-service", arguments: { service: "iam" } });
    expect(prompt.messages[0]!.content).toMatchObject({ type: "text", text: expect.stringContaining("Explain the iam service") });
    expect(prompt.messages[1]!.content).toMatchObject({ type: "resource", resource: { uri: "vault://services/iam", text: expect.stringContaining("# IAM service") } });
  });

  it("refuses an unknown service with the services there are, and a missing argument", async () => {
    await expect(served.client.getPrompt({ name: "explain-service", arguments: { service: "nowhere" } })).rejects.toMatchObject({
      code: ErrorCode.InvalidParams,
      message: expect.stringContaining("iam"),
    });
    await expect(served.client.getPrompt({ name: "explain-service", arguments: {} })).rejects.toMatchObject({ code: ErrorCode.InvalidParams });
  });

  it("which-decision puts the decisions the search finds before the agent, best first", async () => {
    const prompt = await served.client.getPrompt({ name: "which-decision", arguments: { topic: "permissions" } });
    const embedded = prompt.messages.filter((m) => m.content.type === "resource").map((m) => (m.content as { resource: { uri: string } }).resource.uri);
    expect(embedded[0]).toBe("vault://decisions/0004-permissions");
    const none = await served.client.getPrompt({ name: "which-decision", arguments: { topic: "zebra husbandry" } });
    expect(none.messages).toHaveLength(1);
    expect(none.messages[0]!.content).toMatchObject({ type: "text", text: expect.stringContaining("found no decision record") });
  });
});
