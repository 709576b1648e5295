import { z } from "@hono/zod-openapi";
import {
  createServiceApp,
  errorResponses,
  jsonBody,
  jsonContent,
  notFound,
  rawRequestOf,
  withRequestId,
  type HealthCheck,
  type Logger,
  type ServiceMetrics,
} from "@core/kit";
import { PROTECTED_RESOURCE_METADATA_PATH, readerOf, type VaultAccess } from "./access.js";
import { McpSessions } from "./sessions.js";
import type { Vault } from "./vault.js";

export interface VaultDeps {
  vault: Vault;
  logger: Logger;
  /** who may read (issue 29); absent when `CORE_VAULT_AUTH=off`: anyone may */
  access?: VaultAccess;
  /** the MCP sessions (closed by whoever made them); default: new ones over `vault` */
  sessions?: McpSessions;
  /** what `/health/ready` checks besides the folder (IAM's keys, when auth is on) */
  readinessChecks?: HealthCheck[];
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
const ProtectedResourceMetadata = z
  .object({
    resource: z.string().openapi({ example: "https://vault.example.com/mcp", description: "the vault's MCP URL: the audience its access tokens must carry" }),
    authorization_servers: z.array(z.string()).openapi({ description: "IAM's URL" }),
    scopes_supported: z.array(z.string()).openapi({ example: ["vault:read", "offline_access"] }),
    bearer_methods_supported: z.array(z.string()).openapi({ example: ["header"] }),
    resource_name: z.string(),
    resource_documentation: z.string().optional(),
  })
  .openapi("ProtectedResourceMetadata");
const TransportError = jsonContent(JsonRpcAnswer, "A JSON-RPC error of the transport (id null)");
const BadRequest = {
  description: "Not a JSON-RPC request, or no session named where one is needed (a JSON-RPC error without id), or input the service refuses to read (the error envelope)",
  content: { "application/json": { schema: z.union([JsonRpcAnswer, z.object({ error: z.object({ code: z.string(), message: z.string() }) })]) } },
};
/**
 * the refusals of the guard, when auth is required (issue 29); the operations name no security
 * requirement, since `CORE_VAULT_AUTH=off` serves them without one
 */
const AUTH_REFUSALS = {
  ...errorResponses(401, 403, 429, 503),
  401: { ...errorResponses(401)[401], description: "No credential, or one that is invalid, expired or for another audience; WWW-Authenticate: Bearer names the resource metadata (RFC 9728 §5.1)" },
  403: { ...errorResponses(403)[403], description: "The person does not hold vault:read, or the access token was not granted it; WWW-Authenticate: Bearer error=\"insufficient_scope\"" },
  429: { ...errorResponses(429)[429], description: "Too many wrong API keys from this client (IAM's limit)" },
  503: { ...errorResponses(503)[503], description: "IAM cannot check a session token or API key, or its key set cannot be fetched" },
};

/** The vault tool server's HTTP app: MCP at `/mcp` (spec §4.7, DESIGN §8, issue 29) beside the kit's routes. */
export function createApp(deps: VaultDeps) {
  const app = createServiceApp({
    service: "vault",
    title: "Core vault tool server",
    description: "The architecture documents, searchable by AI agents over MCP (JSON-RPC 2.0 at /mcp), an OAuth protected resource of IAM when auth is required.",
    logger: deps.logger,
    healthChecks: deps.healthChecks ?? [{ name: "vault", check: () => deps.vault.check() }],
    // no database: ready while its folder can be read (and, with auth, once IAM's keys are known)
    readinessChecks: [{ name: "vault", check: () => deps.vault.check() }, ...(deps.readinessChecks ?? [])],
    metrics: deps.metrics,
    // the MCP transport answers a wrong media type itself, as a JSON-RPC error
    ownsBody: (path) => path === MCP_PATH,
    // issue 29: every MCP request names its reader, when auth is required
    guard: deps.access ? (c) => (c.req.path === MCP_PATH ? deps.access!.admit(c) : undefined) : undefined,
  });
  const sessions = deps.sessions ?? new McpSessions(deps.vault);
  app.openAPIRegistry.registerPath({
    method: "post",
    path: MCP_PATH,
    summary: "MCP over Streamable HTTP: the vault's 11 read-only tools, its documents as resources, its prompts (spec §4.7, issue 29)",
    description:
      "One JSON-RPC 2.0 request (or notification), one JSON answer. Without Mcp-Session-Id every request is answered on its own; " +
      "a plain JSON-RPC client that sends only Content-Type: application/json works. initialize also opens a session (the " +
      "Mcp-Session-Id response header) for clients that subscribe to documents; a request naming a session this process does not " +
      "hold is answered all the same unless it needs the session (resources/subscribe, resources/unsubscribe: 404). With " +
      "CORE_VAULT_AUTH=required every request carries an access token from IAM, a session token or an API key.",
    tags: ["mcp"],
    request: { body: jsonBody(JsonRpcRequest) },
    responses: {
      200: jsonContent(JsonRpcAnswer, "The JSON-RPC answer: a result, or an error with the request's id"),
      202: { description: "Notifications only: accepted, no body" },
      400: BadRequest,
      ...AUTH_REFUSALS,
      404: TransportError,
      415: jsonContent(JsonRpcAnswer, "The body is not JSON: a JSON-RPC error"),
    },
  });
  app.openAPIRegistry.registerPath({
    method: "get",
    path: MCP_PATH,
    summary: "A session's notification stream (server-sent events): resources/updated for its subscriptions, resources/list_changed",
    description: "Needs the Mcp-Session-Id of a session this process holds, opened by the same person; one stream per session.",
    tags: ["mcp"],
    responses: {
      200: { description: "The event stream", content: { "text/event-stream": { schema: z.string() } } },
      400: BadRequest,
      ...AUTH_REFUSALS,
      404: TransportError,
      406: TransportError,
      409: TransportError,
    },
  });
  app.openAPIRegistry.registerPath({
    method: "delete",
    path: MCP_PATH,
    summary: "Ends a session",
    tags: ["mcp"],
    responses: { 200: { description: "The session is ended" }, 400: BadRequest, ...AUTH_REFUSALS, 404: TransportError },
  });
  for (const path of [PROTECTED_RESOURCE_METADATA_PATH, `${PROTECTED_RESOURCE_METADATA_PATH}${MCP_PATH}`]) {
    app.openAPIRegistry.registerPath({
      method: "get",
      path,
      summary: "The vault's OAuth protected resource metadata (RFC 9728): its URL and IAM as its authorization server",
      description: "Both addresses serve the same document (RFC 9728 §3.1 puts the resource's path after the well-known one). Not found while CORE_VAULT_AUTH=off.",
      tags: ["oauth"],
      responses: { 200: jsonContent(ProtectedResourceMetadata, "The metadata"), ...errorResponses(404) },
    });
    app.get(path, (c) => {
      if (!deps.access) throw notFound("The vault runs without auth (CORE_VAULT_AUTH=off): it is no OAuth protected resource");
      return c.json(deps.access.metadata());
    });
  }
  app.on(["GET", "POST", "DELETE"], MCP_PATH, async (c) => withRequestId(c, await sessions.answer(await rawRequestOf(c), readerOf(c)?.userId ?? null)));
  app.on(["PUT", "PATCH"], MCP_PATH, (c) =>
    c.json({ jsonrpc: "2.0", error: { code: -32000, message: "Method not allowed: use POST, GET or DELETE" }, id: null }, 405, { Allow: "GET, POST, DELETE" }),
  );
  return app;
}
