import { ResourceTemplate, type McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import {
  ErrorCode,
  ListResourcesRequestSchema,
  SubscribeRequestSchema,
  UnsubscribeRequestSchema,
  type ReadResourceResult,
  type Resource,
} from "@modelcontextprotocol/sdk/types.js";
import type { VaultDocument } from "./documents.js";
import type { Vault } from "./vault.js";

/**
 * Every vault document as an MCP resource (issue 29): `vault://services/iam` is the document at
 * `services/iam.md`. The template is `vault://{+path}`, the reserved expansion, because a plain
 * `{path}` stops at the first `/` and would match no document below a folder.
 */
export const RESOURCE_TEMPLATE = "vault://{+path}";
export const RESOURCE_PAGE_SIZE = 100;
const MIME_TYPE = "text/markdown";

export const resourceUri = (path: string) => `vault://${path.split("/").map(encodeURIComponent).join("/")}`;
const SCHEME = "vault://";

/** An error the SDK sends as a JSON-RPC error with this code and message. */
class RpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
  }
}
/** The MCP specification's code for a resource that does not exist. */
const RESOURCE_NOT_FOUND = -32002;

function describe(doc: VaultDocument): Resource {
  return { uri: resourceUri(doc.path), name: doc.path, title: doc.title, ...(doc.summary ? { description: doc.summary } : {}), mimeType: MIME_TYPE };
}

/** A document's markdown after its front matter (the listing gives its title and summary). */
function contentsOf(doc: VaultDocument, uri: string): ReadResourceResult {
  return { contents: [{ uri, mimeType: MIME_TYPE, text: doc.body }] };
}

/** The cursor of `resources/list`: the last path of the page before, opaque to clients. */
const encodeCursor = (path: string) => Buffer.from(JSON.stringify({ after: path }), "utf8").toString("base64url");
function decodeCursor(cursor: string): string {
  try {
    const { after } = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8")) as { after?: unknown };
    if (typeof after === "string" && after.length > 0 && after.length <= 512) return after;
  } catch {
    // answered below
  }
  throw new RpcError(ErrorCode.InvalidParams, "Invalid cursor: pass the nextCursor of the page before, unchanged");
}

/** The vault path a `vault://` address names (`vault://services/iam` → `services/iam`); InvalidParams when it is none. */
function pathOfResourceUri(uri: string): string {
  try {
    if (uri.startsWith(SCHEME) && uri.length > SCHEME.length) return decodeURIComponent(uri.slice(SCHEME.length));
  } catch {
    // answered below
  }
  throw new RpcError(ErrorCode.InvalidParams, `Not a vault document address: ${uri.slice(0, 600)}`);
}

/**
 * `resources/subscribe` and `resources/unsubscribe` (issue 29): the documents of one MCP session
 * whose changes it is told about (`notifications/resources/updated`). Without a session there is
 * nowhere to send them, and a subscription is refused with a message saying so.
 */
export function registerSubscriptions(server: McpServer, vault: Vault, subscriptions: Set<string> | undefined): void {
  const needSession = () => new RpcError(ErrorCode.InvalidRequest, "Subscriptions need a session: send initialize first and then its Mcp-Session-Id with every request");
  server.server.setRequestHandler(SubscribeRequestSchema, (request) => {
    if (!subscriptions) throw needSession();
    const doc = vault.get(pathOfResourceUri(request.params.uri));
    if (!doc) throw new RpcError(RESOURCE_NOT_FOUND, `Resource not found: ${request.params.uri.slice(0, 600)}`);
    subscriptions.add(doc.path);
    return {};
  });
  server.server.setRequestHandler(UnsubscribeRequestSchema, (request) => {
    if (!subscriptions) throw needSession();
    subscriptions.delete(pathOfResourceUri(request.params.uri).replace(/\.md$/i, ""));
    return {};
  });
}

/** Registers the vault's documents as resources on `server`: list (paged by path), read, and the template. */
export function registerVaultResources(server: McpServer, vault: Vault): void {
  server.registerResource(
    "vault-document",
    new ResourceTemplate(RESOURCE_TEMPLATE, {
      // listing is answered below, paged; the template lists nothing itself
      list: undefined,
      complete: {
        path: (value) =>
          vault
            .all()
            .map((doc) => doc.path)
            .filter((path) => path.startsWith(value))
            .sort()
            .slice(0, 100),
      },
    }),
    { title: "Vault document", description: "A document of the architecture vault by its path, e.g. vault://services/iam", mimeType: MIME_TYPE },
    (uri, variables) => {
      const raw = Array.isArray(variables.path) ? variables.path.join("/") : String(variables.path ?? "");
      let path: string;
      try {
        path = decodeURIComponent(raw);
      } catch {
        throw new RpcError(ErrorCode.InvalidParams, `Not a vault document address: ${uri.href.slice(0, 600)}`);
      }
      const doc = vault.get(path);
      if (!doc) throw new RpcError(RESOURCE_NOT_FOUND, `Resource not found: ${uri.href.slice(0, 600)}`);
      return contentsOf(doc, uri.href);
    },
  );
  // The SDK's list ignores the cursor and answers everything at once: a vault of ten thousand
  // documents is listed a page at a time, in path order, so a page stays the same while it is read.
  server.server.setRequestHandler(ListResourcesRequestSchema, (request) => {
    const after = request.params?.cursor === undefined ? null : decodeCursor(request.params.cursor);
    const docs = [...vault.all()].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
    const rest = after === null ? docs : docs.filter((doc) => doc.path > after);
    const page = rest.slice(0, RESOURCE_PAGE_SIZE);
    return {
      resources: page.map(describe),
      ...(rest.length > RESOURCE_PAGE_SIZE ? { nextCursor: encodeCursor(page[page.length - 1]!.path) } : {}),
    };
  });
}
