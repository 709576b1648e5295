import { createServiceApp, rawRequestOf, withRequestId, type HealthCheck, type Logger } from "@core/kit";
import { answerMcpRequest } from "./mcp.js";
import type { Vault } from "./vault.js";

export interface VaultDeps {
  vault: Vault;
  logger: Logger;
  /** what `/health` checks: the vault folder */
  healthChecks?: HealthCheck[];
}

const MCP_PATH = "/mcp";

/** The vault tool server's HTTP app: MCP at `POST /mcp` (spec §4.7, DESIGN §8) beside the kit's routes. */
export function createApp(deps: VaultDeps) {
  const app = createServiceApp({
    service: "vault",
    title: "Core vault tool server",
    description: "The architecture documents, searchable by AI agents over MCP (JSON-RPC 2.0 at POST /mcp).",
    logger: deps.logger,
    healthChecks: deps.healthChecks ?? [{ name: "vault", check: () => deps.vault.check() }],
    // the MCP transport answers a wrong media type itself, as a JSON-RPC error
    ownsBody: (path) => path === MCP_PATH,
  });
  app.post(MCP_PATH, async (c) => withRequestId(c, await answerMcpRequest(deps.vault, await rawRequestOf(c))));
  // stateless server: no SSE stream to open (GET) and no session to end (DELETE)
  app.on(["GET", "DELETE", "PUT", "PATCH"], MCP_PATH, (c) =>
    c.json({ jsonrpc: "2.0", error: { code: -32000, message: "Method not allowed: use POST" }, id: null }, 405, { Allow: "POST" }),
  );
  return app;
}
