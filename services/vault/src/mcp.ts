import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import { CallToolRequestSchema, ErrorCode, type CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import { registerVaultPrompts } from "./prompts.js";
import { registerSubscriptions, registerVaultResources } from "./resources.js";
import { VAULT_TOOLS } from "./tools.js";
import type { Vault } from "./vault.js";

export const SERVER_INFO = { name: "core-vault", version: "0.1.0" } as const;

const READ_ONLY = { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false } as const;

function text(value: unknown, isError = false): CallToolResult {
  return { content: [{ type: "text", text: typeof value === "string" ? value : JSON.stringify(value) }], ...(isError ? { isError } : {}) };
}

/**
 * A JSON-RPC invalid-params error. The SDK answers any thrown error with its `code` and `message`;
 * its own McpError would prefix the message with "MCP error -32602:", which says the code twice.
 */
class InvalidParams extends Error {
  readonly code = ErrorCode.InvalidParams;
}

/**
 * An MCP server exposing the vault's tools (spec §4.7), its documents as resources and its prompts
 * (issue 29): for one request (stateless), or for one session, whose `subscriptions` it keeps.
 */
export function createMcpServer(vault: Vault, subscriptions?: Set<string>): McpServer {
  const server = new McpServer(SERVER_INFO, { capabilities: { tools: {} } });
  const inputs = new Map<string, z.ZodObject>();
  for (const definition of VAULT_TOOLS) {
    const input = z.object(definition.input).strict();
    inputs.set(definition.name, input);
    server.registerTool(
      definition.name,
      { title: definition.name, description: definition.description, inputSchema: definition.input, annotations: READ_ONLY },
      () => text(""), // never called: tools/call is answered below
    );
  }
  // McpServer turns unknown tools and invalid arguments into tool results; the spec wants a
  // JSON-RPC error for bad params (-32602), and a tool error result only for what was not found
  server.server.setRequestHandler(CallToolRequestSchema, (request) => {
    const { name, arguments: args } = request.params;
    const definition = VAULT_TOOLS.find((t) => t.name === name);
    if (!definition) throw new InvalidParams(`Unknown tool: ${name}`);
    const parsed = inputs.get(name)!.safeParse(args ?? {});
    if (!parsed.success) {
      const detail = parsed.error.issues.map((issue) => `${issue.path.join(".") || "arguments"}: ${issue.message}`).join("; ");
      throw new InvalidParams(`Invalid arguments for ${name}: ${detail}`);
    }
    const outcome = definition.run(vault, parsed.data as never);
    return "notFound" in outcome ? text(outcome.notFound, true) : text(outcome.output);
  });
  registerVaultResources(server, vault);
  registerSubscriptions(server, vault, subscriptions);
  registerVaultPrompts(server, vault);
  // what is declared is what happens: documents come and go and are watched (the session sends
  // both notifications), the tools and prompts are fixed
  server.server.registerCapabilities({ resources: { subscribe: true, listChanged: true }, tools: { listChanged: false }, prompts: { listChanged: false } });
  return server;
}

/**
 * A plain JSON-RPC client sends only `Content-Type: application/json`; the SDK transport refuses a
 * POST that does not also accept `text/event-stream` (406), so the Accept header is completed here:
 * with JSON responses enabled, JSON is what the client gets either way.
 */
export function withFullAccept(request: Request, body: string | undefined): Request {
  const headers = new Headers(request.headers);
  const accept = headers.get("accept") ?? "";
  if (request.method === "POST" && (!accept.includes("application/json") || !accept.includes("text/event-stream"))) {
    headers.set("accept", "application/json, text/event-stream");
  }
  return new Request(request.url, { method: request.method, headers, body });
}

/**
 * Answers one request without a session: a fresh server and stateless transport, a JSON answer
 * (spec §4.7). `parsedBody` is the body already read as JSON, when it was JSON.
 */
export async function answerStatelessly(vault: Vault, request: Request, parsedBody: unknown): Promise<Response> {
  const server = createMcpServer(vault);
  const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
  await server.connect(transport);
  try {
    return await transport.handleRequest(request, parsedBody === undefined ? undefined : { parsedBody });
  } finally {
    await transport.close();
    await server.close();
  }
}
