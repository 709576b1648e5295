import { describe, expect, it } from "vitest";
import { ErrorCode } from "@modelcontextprotocol/sdk/types.js";
import { outputOf, rawRpc, servedVault } from "./support/vault-server.js";

const TOOL_NAMES = [
  "search_docs",
  "read_doc",
  "read_section",
  "get_service_spec",
  "list_services",
  "get_adr",
  "list_adrs",
  "get_rules",
  "get_rules_by_tier",
  "get_cross_cutting",
  "get_links",
];

const served = servedVault();

describe("POST /mcp through the SDK client", () => {
  it("initializes and names the server", () => {
    expect(served.client.getServerVersion()?.name).toBe("core-vault");
    expect(served.client.getServerCapabilities()?.tools).toBeDefined();
  });

  it("lists the 11 tools of spec §4.7, each read-only, described, with an object input schema", async () => {
    const { tools } = await served.client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual([...TOOL_NAMES].sort());
    for (const tool of tools) {
      expect(tool.annotations?.readOnlyHint, tool.name).toBe(true);
      expect(tool.annotations?.destructiveHint, tool.name).toBe(false);
      expect(tool.description!.length, tool.name).toBeGreaterThan(20);
      expect(tool.inputSchema.type).toBe("object");
    }
    const search = tools.find((t) => t.name === "search_docs")!;
    expect(search.inputSchema.required).toEqual(["query"]);
    expect(search.inputSchema.properties).toMatchObject({
      category: { enum: ["services", "concepts", "cross-cutting", "guides", "rules", "decisions", "implementation"] },
      limit: { type: "integer", minimum: 1, maximum: 50 },
    });
  });

  it("answers tools/call with exactly one text item holding JSON", async () => {
    const result = await served.client.callTool({ name: "search_docs", arguments: { query: "tenancy" } });
    expect(result.content).toHaveLength(1);
    expect(outputOf(result)[0]).toMatchObject({ path: "concepts/tenancy", title: "Tenancy" });
  });

  it("gives a JSON-RPC invalid-params error for an unknown tool", async () => {
    await expect(served.client.callTool({ name: "delete_docs", arguments: {} })).rejects.toMatchObject({ code: ErrorCode.InvalidParams });
  });
});

describe("POST /mcp from a plain JSON-RPC client (Content-Type: application/json only)", () => {
  it("initializes without an Accept header listing text/event-stream", async () => {
    const { status, contentType, body } = await rawRpc(served.server.mcpUrl, "initialize", {
      protocolVersion: "2025-06-18",
      capabilities: {},
      clientInfo: { name: "curl", version: "1" },
    });
    expect(status).toBe(200);
    expect(contentType).toMatch(/^application\/json/);
    expect(body).toMatchObject({ jsonrpc: "2.0", id: 1, result: { serverInfo: { name: "core-vault" } } });
  });

  it("lists tools and calls one in the spec's response shape", async () => {
    const list = await rawRpc(served.server.mcpUrl, "tools/list", {}, 2);
    expect(list.body.result.tools).toHaveLength(11);
    const call = await rawRpc(served.server.mcpUrl, "tools/call", { name: "search_docs", arguments: { query: "slugs" } }, "three");
    expect(call.status).toBe(200);
    expect(call.body).toEqual({ jsonrpc: "2.0", id: "three", result: { content: [{ type: "text", text: expect.any(String) }] } });
    const items = JSON.parse(call.body.result.content[0].text);
    expect(items[0]).toEqual({ path: "concepts/tenancy", title: "Tenancy", snippet: expect.stringContaining("Slugs"), score: expect.any(Number) });
  });

  it("answers bad params with JSON-RPC error -32602", async () => {
    const { body } = await rawRpc(served.server.mcpUrl, "tools/call", { name: "read_doc", arguments: { path: 42 } });
    expect(body).toMatchObject({ jsonrpc: "2.0", id: 1, error: { code: -32602, message: "Invalid arguments for read_doc: path: Invalid input: expected string, received number" } });
  });

  it("answers an unknown method with JSON-RPC error -32601", async () => {
    const { body } = await rawRpc(served.server.mcpUrl, "tools/destroy", {});
    expect(body).toMatchObject({ error: { code: -32601 } });
  });

  it("answers malformed JSON with a JSON-RPC parse error", async () => {
    const response = await fetch(served.server.mcpUrl, { method: "POST", headers: { "Content-Type": "application/json" }, body: "{not json" });
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({ jsonrpc: "2.0", error: { code: -32700 } });
  });

  it("echoes a sane x-request-id, and gives one to a request that has none", async () => {
    const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" });
    const headers = { "Content-Type": "application/json" };
    const echoed = await fetch(served.server.mcpUrl, { method: "POST", headers: { ...headers, "x-request-id": "agent-7" }, body });
    expect(echoed.headers.get("x-request-id")).toBe("agent-7");
    const fresh = await fetch(served.server.mcpUrl, { method: "POST", headers, body });
    expect(fresh.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("answers GET on /mcp without a session with 400: a stream belongs to a session", async () => {
    const response = await fetch(served.server.mcpUrl, { headers: { accept: "text/event-stream" } });
    expect(response.status).toBe(400);
    expect(await response.json()).toEqual({ jsonrpc: "2.0", error: { code: -32000, message: "Bad Request: Mcp-Session-Id header is required" }, id: null });
  });

  it("refuses PUT on /mcp with 405, naming the methods it takes", async () => {
    const response = await fetch(served.server.mcpUrl, { method: "PUT", headers: { "content-type": "application/json" }, body: "{}" });
    expect(response.status).toBe(405);
    expect(response.headers.get("allow")).toBe("GET, POST, DELETE");
  });
});

describe("every tool over raw HTTP", () => {
  // tool → arguments that find something, arguments naming what does not exist (if it can), bad arguments
  const cases: [string, Record<string, unknown>, Record<string, unknown> | null, Record<string, unknown>][] = [
    ["search_docs", { query: "tenancy", limit: 2 }, null, { query: "" }],
    ["read_doc", { path: "services/iam" }, { path: "services/none" }, {}],
    ["read_section", { path: "concepts/tenancy", heading: "slugs" }, { path: "concepts/tenancy", heading: "nothing like it" }, { path: "concepts/tenancy" }],
    ["get_service_spec", { service: "iam" }, { service: "billing-x" }, { service: 7 }],
    ["list_services", {}, null, { all: true }],
    ["get_adr", { number: 4 }, { number: 99 }, { number: "4" }],
    ["list_adrs", { status: "accepted" }, null, { status: "" }],
    ["get_rules", { domain: "security" }, { domain: "cooking" }, {}],
    ["get_rules_by_tier", { tier: 1 }, null, { tier: 0 }],
    ["get_cross_cutting", { concern: "errors" }, { concern: "weather" }, { concern: 1 }],
    ["get_links", { path: "services/iam" }, { path: "services/none" }, { path: "" }],
  ];

  it.each(cases)("%s answers found, not found and bad arguments in their three shapes", async (name, good, missing, bad) => {
    const found = await rawRpc(served.server.mcpUrl, "tools/call", { name, arguments: good });
    expect(found.body.result.isError, name).toBeUndefined();
    expect(found.body.result.content).toEqual([{ type: "text", text: expect.any(String) }]);
    expect(() => JSON.parse(found.body.result.content[0].text)).not.toThrow();
    if (missing) {
      const absent = await rawRpc(served.server.mcpUrl, "tools/call", { name, arguments: missing });
      expect(absent.body.result).toEqual({ content: [{ type: "text", text: expect.stringMatching(/not found|No heading|No rules/) }], isError: true });
    }
    const refused = await rawRpc(served.server.mcpUrl, "tools/call", { name, arguments: bad });
    expect(refused.body.error, name).toMatchObject({ code: -32602, message: expect.stringContaining(`Invalid arguments for ${name}`) });
  });
});

describe("the description of POST /mcp", () => {
  const post = (body: string, contentType = "application/json") =>
    fetch(served.server.mcpUrl, { method: "POST", headers: { "content-type": contentType }, body });

  it("describes /mcp, the resource metadata, /health and /metrics, and each answer it lists for POST /mcp is one the endpoint gives", async () => {
    const doc = (await (await fetch(`${served.server.url}/openapi.json`)).json()) as { paths: Record<string, Record<string, { responses: Record<string, unknown> }>> };
    expect(Object.keys(doc.paths).sort()).toEqual([
      "/.well-known/oauth-protected-resource",
      "/.well-known/oauth-protected-resource/mcp",
      "/health",
      "/health/live",
      "/health/ready",
      "/mcp",
      "/metrics",
    ]);
    expect(Object.keys(doc.paths["/mcp"]!).sort()).toEqual(["delete", "get", "post"]);
    const listed = Object.keys(doc.paths["/mcp"]!.post!.responses).sort();
    // 401, 403, 429 and 503 are the refusals of auth, given in access.test.ts and service-auth's tests
    expect(listed).toEqual(["200", "202", "400", "401", "403", "404", "413", "415", "429", "431", "503"]);
    const seen = [
      (await post(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" }))).status,
      (await post(JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }))).status,
      (await post("{not json")).status,
      (await post('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search_docs","arguments":{"query":"a\\u0000"}}}')).status,
      (await post(`{"jsonrpc":"2.0","id":1,"method":"ping","params":${"[".repeat(100)}${"]".repeat(100)}}`)).status,
      (await post(JSON.stringify({ pad: "x".repeat(1024 * 1024) }))).status,
      (await post("ping", "text/plain")).status,
      (await fetch(`${served.server.mcpUrl}?pad=${"x".repeat(20_000)}`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" })).status,
      (
        await fetch(served.server.mcpUrl, {
          method: "POST",
          headers: { "content-type": "application/json", "mcp-session-id": "no-such-session" },
          body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "resources/subscribe", params: { uri: "vault://services/iam" } }),
        })
      ).status,
    ];
    expect(seen).toEqual([200, 202, 400, 400, 400, 413, 415, 431, 404]);
  });
});

describe("the kit's routes", () => {
  it("serves /health, /metrics and /docs like every service", async () => {
    const health = await fetch(`${served.server.url}/health`);
    expect(health.status).toBe(200);
    expect((await fetch(`${served.server.url}/metrics`)).status).toBe(200);
    expect((await fetch(`${served.server.url}/docs`)).status).toBe(200);
  });
});
