import { z } from "@hono/zod-openapi";
import { createServiceApp, jsonBody, jsonContent, rawRequestOf, withRequestId, type HealthCheck, type Logger, type ServiceMetrics } from "@core/kit";
import { answerMcpRequest } from "./mcp.js";
import type { Vault } from "./vault.js";

export interface VaultDeps {
  vault: Vault;
  logger: Logger;
  /** what `/health` checks: the vault folder */
  healthChecks?: HealthCheck[];
  metrics?: ServiceMetrics;
}

const MCP_PATH = "/mcp";

const JsonRpcId = z.union([z.string(), z.number().int(), z.null()]);
const JsonRpcRequest = z
  .object({
    jsonrpc: z.literal("2.0"),
    id: JsonRpcId.optional().openapi({ description: "absent for a notification" }),
    method: z.string().openapi({ example: "tools/call", description: "initialize, tools/list, tools/call, ping, or a notification" }),
    params: z.record(z.string(), z.unknown()).optional().openapi({ example: { name: "search_docs", arguments: { query: "service tokens" } } }),
  })
  .openapi("JsonRpcRequest");
const JsonRpcError = z.object({ code: z.number().int(), message: z.string(), data: z.unknown().optional() });
const JsonRpcAnswer = z
  .object({
    jsonrpc: z.literal("2.0"),
    id: JsonRpcId,
    result: z.record(z.string(), z.unknown()).optional().openapi({
      description: "tools/call: { content: [{ type: \"text\", text: <JSON of the tool's output> }], isError? } (spec §4.7)",
    }),
    error: JsonRpcError.optional().openapi({ description: "-32700 parse error, -32600 invalid request, -32601 unknown method, -32602 invalid params" }),
  })
  .openapi("JsonRpcAnswer");

/** The vault tool server's HTTP app: MCP at `POST /mcp` (spec §4.7, DESIGN §8) beside the kit's routes. */
export function createApp(deps: VaultDeps) {
  const app = createServiceApp({
    service: "vault",
    title: "Core vault tool server",
    description: "The architecture documents, searchable by AI agents over MCP (JSON-RPC 2.0 at POST /mcp).",
    logger: deps.logger,
    healthChecks: deps.healthChecks ?? [{ name: "vault", check: () => deps.vault.check() }],
    // no database: ready while its folder can be read
    readinessChecks: [{ name: "vault", check: () => deps.vault.check() }],
    metrics: deps.metrics,
    // the MCP transport answers a wrong media type itself, as a JSON-RPC error
    ownsBody: (path) => path === MCP_PATH,
  });
  app.openAPIRegistry.registerPath({
    method: "post",
    path: MCP_PATH,
    summary: "The vault's 11 read-only tools over MCP: one JSON-RPC 2.0 request, one JSON answer (spec §4.7)",
    description:
      "Streamable HTTP, stateless, JSON answers (no event stream, no session). A plain JSON-RPC client that sends only " +
      "Content-Type: application/json works. Tools and their input schemas are listed by tools/list.",
    tags: ["mcp"],
    request: { body: jsonBody(JsonRpcRequest) },
    responses: {
      200: jsonContent(JsonRpcAnswer, "The JSON-RPC answer: a result, or an error with the request's id"),
      202: { description: "Notifications only: accepted, no body" },
      400: {
        description: "Not a JSON-RPC request (a JSON-RPC error without id), or input the service refuses to read (the error envelope)",
        content: { "application/json": { schema: z.union([JsonRpcAnswer, z.object({ error: z.object({ code: z.string(), message: z.string() }) })]) } },
      },
      415: jsonContent(JsonRpcAnswer, "The body is not JSON: a JSON-RPC error"),
    },
  });
  app.post(MCP_PATH, async (c) => withRequestId(c, await answerMcpRequest(deps.vault, await rawRequestOf(c))));
  // stateless server: no SSE stream to open (GET) and no session to end (DELETE)
  app.on(["GET", "DELETE", "PUT", "PATCH"], MCP_PATH, (c) =>
    c.json({ jsonrpc: "2.0", error: { code: -32000, message: "Method not allowed: use POST" }, id: null }, 405, { Allow: "POST" }),
  );
  return app;
}
