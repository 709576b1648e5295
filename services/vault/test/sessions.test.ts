import { describe, expect, it } from "vitest";
import { ErrorCode, ResourceListChangedNotificationSchema, ResourceUpdatedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { manualClock } from "@core/kit";
import { SESSION_IDLE_MS } from "../src/sessions.js";
import { connectClient, eventually, rawRpc, servedVault } from "./support/vault-server.js";

const JSON_AND_SSE = { "content-type": "application/json", accept: "application/json, text/event-stream" };

/** A raw `initialize`: the session id the server gave. */
async function openSession(mcpUrl: string, headers: Record<string, string> = {}): Promise<string> {
  const response = await fetch(mcpUrl, {
    method: "POST",
    headers: { ...JSON_AND_SSE, ...headers },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "1" } } }),
  });
  expect(response.status).toBe(200);
  const id = response.headers.get("mcp-session-id");
  expect(id).toMatch(/^[0-9a-f-]{36}$/);
  await response.body?.cancel();
  return id!;
}

/** One JSON-RPC request in a session. */
async function inSession(mcpUrl: string, sessionId: string, method: string, params: unknown = {}, headers: Record<string, string> = {}) {
  const response = await fetch(mcpUrl, {
    method: "POST",
    headers: { ...JSON_AND_SSE, "mcp-session-id": sessionId, ...headers },
    body: JSON.stringify({ jsonrpc: "2.0", id: 7, method, params }),
  });
  return { status: response.status, sessionId: response.headers.get("mcp-session-id"), body: (await response.json()) as any };
}

describe("subscriptions through the SDK client, over a session", () => {
  const served = servedVault({ symlinks: false });
  const updated: string[] = [];
  let listChanged = 0;

  it("declares subscriptions and list changes for resources, and no changes of tools or prompts", () => {
    const capabilities = served.client.getServerCapabilities();
    expect(capabilities?.resources).toEqual({ subscribe: true, listChanged: true });
    expect(capabilities?.tools).toEqual({ listChanged: false });
    expect(capabilities?.prompts).toEqual({ listChanged: false });
  });

  it("tells a subscriber that its document changed on disk, and not about a document it did not subscribe to", async () => {
    served.client.setNotificationHandler(ResourceUpdatedNotificationSchema, (notification) => void updated.push(notification.params.uri));
    served.client.setNotificationHandler(ResourceListChangedNotificationSchema, () => void listChanged++);
    await served.client.subscribeResource({ uri: "vault://services/iam" });
    // the client opens its notification stream once initialized, on its own
    await eventually(() => expect(served.server.sessions.listening).toBe(1));

    served.files.write("concepts/tenancy.md", "---\ntitle: Tenancy\n---\n# Tenancy\nNot subscribed.\n");
    await eventually(() => expect(served.server.vault.get("concepts/tenancy")?.body).toContain("Not subscribed"));
    await served.server.vault.settled();
    served.files.write("services/iam.md", "---\ntitle: IAM service\n---\n# IAM service\nChanged.\n");
    await eventually(() => expect(updated).toContain("vault://services/iam"));
    expect(updated).toEqual(["vault://services/iam"]);
    expect(listChanged).toBe(0);
  });

  it("tells every session that the list changed when a document is added, and stops telling after unsubscribe", async () => {
    await served.client.unsubscribeResource({ uri: "vault://services/iam" });
    served.files.write("guides/bilby.md", "---\ntitle: Bilby\n---\n# Bilby\n");
    await eventually(() => expect(listChanged).toBe(1));
    served.files.write("services/iam.md", "---\ntitle: IAM service\n---\n# IAM service\nChanged again.\n");
    await eventually(() => expect(served.server.vault.get("services/iam")?.body).toContain("again"));
    await served.server.vault.settled();
    // the list change came after the first update on the same stream; nothing more came for iam
    served.files.write("guides/bilby.md", "---\ntitle: Bilby\n---\n# Bilby\nGone soon.\n");
    await served.server.vault.settled();
    expect(updated).toEqual(["vault://services/iam"]);
  });

  it("counts a stream as open only while the client holds it: a client gone leaves its session free to idle out", async () => {
    const before = served.server.sessions.listening;
    const client = await connectClient(served.server.mcpUrl);
    await eventually(() => expect(served.server.sessions.listening).toBe(before + 1));
    await client.close();
    await eventually(() => expect(served.server.sessions.listening).toBe(before));
  });

  it("refuses to subscribe to a document that does not exist (-32002) or to an address that is not the vault's (-32602)", async () => {
    await expect(served.client.subscribeResource({ uri: "vault://services/none" })).rejects.toMatchObject({ code: -32002 });
    await expect(served.client.subscribeResource({ uri: "https://example.com/x" })).rejects.toMatchObject({ code: ErrorCode.InvalidParams });
  });
});

describe("sessions over raw HTTP", () => {
  const clock = manualClock(new Date());
  const served = servedVault({ client: false, serving: { sessions: { clock, maxSessions: 3 } } });

  it("answers a POST without a session id on its own, in JSON, with no session opened", async () => {
    const before = served.server.sessions.size;
    const response = await fetch(served.server.mcpUrl, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "read_doc", arguments: { path: "services/iam" } } }),
    });
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toMatch(/^application\/json/);
    expect(response.headers.get("mcp-session-id")).toBeNull();
    expect(((await response.json()) as any).result.content[0].text).toContain("services/iam");
    expect(served.server.sessions.size).toBe(before);
  });

  it("opens a session on initialize, even for a client that accepts only JSON", async () => {
    const before = served.server.sessions.size;
    const { status, body } = await rawRpc(served.server.mcpUrl, "initialize", { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "curl", version: "1" } });
    expect(status).toBe(200);
    expect(body.result.capabilities.resources).toEqual({ subscribe: true, listChanged: true });
    expect(served.server.sessions.size).toBe(before + 1);
  });

  it("refuses a subscription without a session, saying how to get one", async () => {
    const { body } = await rawRpc(served.server.mcpUrl, "resources/subscribe", { uri: "vault://services/iam" });
    expect(body.error).toEqual({ code: ErrorCode.InvalidRequest, message: "Subscriptions need a session: send initialize first and then its Mcp-Session-Id with every request" });
  });

  it("answers tools, reads and prompts naming a session it does not hold (another replica's), and 404 to what needs the session", async () => {
    const unknown = "3f2c9a3e-0000-4000-8000-000000000000";
    const call = await inSession(served.server.mcpUrl, unknown, "resources/read", { uri: "vault://services/iam" });
    expect(call.status).toBe(200);
    expect(call.body.result.contents[0].uri).toBe("vault://services/iam");
    const prompt = await inSession(served.server.mcpUrl, unknown, "prompts/list");
    expect(prompt.body.result.prompts.length).toBeGreaterThan(0);
    const subscribe = await inSession(served.server.mcpUrl, unknown, "resources/subscribe", { uri: "vault://services/iam" });
    expect(subscribe).toMatchObject({ status: 404, body: { jsonrpc: "2.0", error: { code: -32001, message: "Session not found" }, id: null } });
    const stream = await fetch(served.server.mcpUrl, { headers: { accept: "text/event-stream", "mcp-session-id": unknown } });
    expect(stream.status).toBe(404);
  });

  it("ends a session on DELETE: what needs it then answers 404", async () => {
    const id = await openSession(served.server.mcpUrl);
    expect((await inSession(served.server.mcpUrl, id, "resources/subscribe", { uri: "vault://services/iam" })).status).toBe(200);
    const size = served.server.sessions.size;
    const ended = await fetch(served.server.mcpUrl, { method: "DELETE", headers: { "mcp-session-id": id } });
    expect(ended.status).toBe(200);
    expect(served.server.sessions.size).toBe(size - 1);
    expect((await inSession(served.server.mcpUrl, id, "resources/subscribe", { uri: "vault://services/iam" })).status).toBe(404);
    expect((await fetch(served.server.mcpUrl, { method: "DELETE", headers: { "mcp-session-id": id } })).status).toBe(404);
  });

  it("ends a session idle for longer than allowed, by the injected clock, and keeps one used just inside it", async () => {
    const idle = await openSession(served.server.mcpUrl);
    clock.advance(SESSION_IDLE_MS - 1_000);
    const used = await openSession(served.server.mcpUrl);
    clock.advance(1_001);
    served.server.sessions.sweep();
    expect((await inSession(served.server.mcpUrl, idle, "resources/subscribe", { uri: "vault://services/iam" })).status).toBe(404);
    expect((await inSession(served.server.mcpUrl, used, "resources/subscribe", { uri: "vault://services/iam" })).status).toBe(200);
  });

  it("holds at most its cap of sessions: a new one ends the least recently used", async () => {
    const first = await openSession(served.server.mcpUrl);
    const second = await openSession(served.server.mcpUrl);
    const third = await openSession(served.server.mcpUrl);
    // used last-but-one: the first is now the least recently used
    expect((await inSession(served.server.mcpUrl, first, "ping")).status).toBe(200);
    expect(served.server.sessions.size).toBe(3);
    await openSession(served.server.mcpUrl);
    expect(served.server.sessions.size).toBe(3);
    expect((await inSession(served.server.mcpUrl, second, "resources/subscribe", { uri: "vault://services/iam" })).status).toBe(404);
    expect((await inSession(served.server.mcpUrl, first, "resources/subscribe", { uri: "vault://services/iam" })).status).toBe(200);
    expect((await inSession(served.server.mcpUrl, third, "resources/subscribe", { uri: "vault://services/iam" })).status).toBe(200);
  });
});
