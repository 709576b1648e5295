import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { ErrorCode, type GetPromptResult } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import type { VaultDocument } from "./documents.js";
import { resourceUri } from "./resources.js";
import { inFolder, serviceName } from "./tools.js";
import type { Vault } from "./vault.js";

/** How many decisions `which-decision` puts before the agent. */
export const DECISION_CANDIDATES = 5;

class InvalidParams extends Error {
  readonly code = ErrorCode.InvalidParams;
}

/** A document embedded in a prompt message, as the resource the client can also read. */
const embedded = (doc: VaultDocument) => ({
  role: "user" as const,
  content: { type: "resource" as const, resource: { uri: resourceUri(doc.path), mimeType: "text/markdown", text: doc.body } },
});
const said = (text: string) => ({ role: "user" as const, content: { type: "text" as const, text } });

/**
 * The vault's prompts (issue 29): tasks an agent is often given about this code base, each with the
 * documents it needs embedded, so the answer starts from the vault and not from a guess.
 */
export function registerVaultPrompts(server: McpServer, vault: Vault): void {
  server.registerPrompt(
    "explain-service",
    {
      title: "Explain a service",
      description: "What one service of the control plane owns and offers, from its vault document, with the decisions it links to",
      argsSchema: { service: z.string().trim().min(1).max(100).describe("The service name, e.g. iam or billing") },
    },
    ({ service }): GetPromptResult => {
      const services = inFolder(vault, "services");
      const doc = services.find((d) => serviceName(d) === service);
      if (!doc) throw new InvalidParams(`Unknown service: ${service}; the vault documents ${services.map(serviceName).sort().join(", ")}`);
      return {
        description: `Explain the ${serviceName(doc)} service`,
        messages: [
          said(
            `Explain the ${serviceName(doc)} service of the Core control plane to an engineer new to it: what it owns, ` +
              "the routes and events it offers, what it depends on, and which decisions shape it. Start from its document below; " +
              "read the documents it links to with the vault's tools (read_doc, get_adr) before you rely on them, and say where the vault is silent.",
          ),
          embedded(doc),
        ],
      };
    },
  );
  server.registerPrompt(
    "which-decision",
    {
      title: "Which decision covers this?",
      description: "Finds the architecture decision records about a topic and asks which one decides it",
      argsSchema: { topic: z.string().trim().min(1).max(500).describe("What the decision is about, e.g. refresh token rotation") },
    },
    ({ topic }): GetPromptResult => {
      const found = vault
        .search(topic, { category: "decisions", limit: DECISION_CANDIDATES })
        .map((hit) => vault.get(hit.path))
        .filter((doc): doc is VaultDocument => doc !== undefined);
      const ask =
        `Which architecture decision record of the Core control plane covers this: ${topic}? ` +
        "Answer with its number and title, quote the sentences that decide it, and say whether its status is accepted. " +
        "If none of them decides it, say so plainly rather than stretching one.";
      return {
        description: `Which decision covers: ${topic}`,
        messages: found.length
          ? [said(`${ask} The vault's search found these candidates, best first:`), ...found.map(embedded)]
          : [said(`${ask} The vault's search found no decision record mentioning it; list_adrs gives all of them.`)],
      };
    },
  );
}
