import { randomUUID } from "node:crypto";
import { oauthClientMetadataSchema, type ClientDiscovery, type SchemaClient, type Scope } from "@better-auth/oauth-provider";
import { APIError } from "better-auth/api";
import { and, eq, sql } from "drizzle-orm";
import { fetch, type Agent } from "undici";
import type { Clock } from "@core/kit";
import type { Db } from "@core/storage";
import { PrivateAddressRefused, webhookAgent } from "@core/webhooks";
import type { ClientMetadataConfig } from "./config.js";
import { clientMetadataDocuments, oauthClient, oauthClientResource } from "./db/schema.js";

/**
 * Client ID Metadata Documents (draft-ietf-oauth-client-id-metadata-document; the MCP 2025-11-25
 * specification's preferred registration; ADR 0028): a client whose id is an https URL is described
 * by the JSON document at that URL. IAM fetches it through the SSRF guard of webhooks (no loopback or
 * private address, the address checked where the socket connects), follows no redirect, reads at
 * most 5 KB within the configured time, and accepts only a public client (no secret, PKCE) whose
 * document names itself. The client is stored as a row of the plugin's `oauth_client`, owned by this
 * discovery, linked to the vault, and fetched again when its copy is older than the document's
 * `Cache-Control: max-age` (bounded to 5 minutes … 24 hours, 1 hour without one).
 *
 * A known client whose host does not answer (no connection, a timeout, a 5xx) keeps its stored copy
 * for up to a day past its refresh time, retried every 5 minutes; any other answer that is not a
 * valid document (404, a different `client_id`, a redirect URI dropped) takes effect at once: the
 * owner has spoken. A new client whose document fails is refused: on the authorization endpoint the
 * browser goes to IAM's error page, never to a redirect URI nobody vouched for.
 */

/** Persisted as each client's provenance (`client_discovery_id`): the convention of the plugin's own companion. */
export const CLIENT_METADATA_DISCOVERY = "cimd";
/** The draft suggests 5 KB as the most a document needs. */
export const MAX_DOCUMENT_BYTES = 5 * 1024;
/** A client id longer than this is not looked up. */
export const MAX_CLIENT_ID_LENGTH = 512;
const MIN_FRESH_SECONDS = 5 * 60;
const MAX_FRESH_SECONDS = 24 * 3600;
const DEFAULT_FRESH_SECONDS = 3600;
/** How long past its refresh time a stored copy stands in while the document's host does not answer. */
const STALE_IF_UNREACHABLE_MS = 24 * 3600_000;
/** How soon a host that did not answer is tried again, meanwhile the stored copy answers. */
const RETRY_UNREACHABLE_MS = 5 * 60_000;

/** Why a document was not accepted; `unreachable` is its host not answering, anything else is the answer. */
export class ClientMetadataRefused extends Error {
  constructor(
    message: string,
    readonly unreachable = false,
  ) {
    super(message);
  }
}

/**
 * Whether a client id is a metadata document's address (draft §3): https, a path, no fragment,
 * credentials or dot segments, written as its URL parser writes it (so comparing strings is comparing
 * addresses), and not too long.
 */
export function isClientMetadataUrl(clientId: string): boolean {
  if (clientId.length > MAX_CLIENT_ID_LENGTH || !clientId.startsWith("https://")) return false;
  let url: URL;
  try {
    url = new URL(clientId);
  } catch {
    return false;
  }
  // dot segments and a default port are rewritten by the parser, so they fail the comparison
  return url.href === clientId && url.pathname !== "/" && !clientId.includes("#") && !url.username && !url.password;
}

const LOOPBACK_HOSTS = ["localhost", "127.0.0.1", "[::1]"];

/**
 * A redirect URI a document may list: https at the document's own origin (so its host is the one
 * the consent page names), or http on a loopback host for a native client (RFC 8252 §7.3; the rule
 * of dynamic registration in oauth-provider.ts). No fragment, no credentials.
 */
function redirectAllowed(uri: string, clientOrigin: string): boolean {
  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    return false;
  }
  if (uri.includes("#") || url.username || url.password) return false;
  if (url.protocol === "http:") return LOOPBACK_HOSTS.includes(url.hostname);
  return url.protocol === "https:" && url.origin === clientOrigin;
}

/** The document's own fields IAM keeps, checked (draft §4.1): the plugin's schema, then our rules for a public document. */
export function acceptedMetadata(clientId: string, document: unknown) {
  if (!document || typeof document !== "object" || Array.isArray(document)) throw new ClientMetadataRefused("the client metadata document is not a JSON object");
  const raw = document as Record<string, unknown>;
  // draft §4.1: a document is public; a shared secret in it is no secret
  if ("client_secret" in raw || "client_secret_expires_at" in raw) throw new ClientMetadataRefused("the client metadata document contains a client secret");
  const parsed = oauthClientMetadataSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new ClientMetadataRefused(`the client metadata document is not valid client metadata (${issue?.path.join(".") || "document"}: ${issue?.message ?? "invalid"})`);
  }
  const metadata = parsed.data;
  // draft §4.1: simple string comparison
  if (metadata.client_id !== clientId) throw new ClientMetadataRefused("the client metadata document's client_id is not the address it was fetched from");
  if ((metadata.token_endpoint_auth_method ?? "none") !== "none") throw new ClientMetadataRefused('the client metadata document must use token_endpoint_auth_method "none" (a public client with PKCE)');
  const redirectUris = metadata.redirect_uris ?? [];
  if (redirectUris.length === 0) throw new ClientMetadataRefused("the client metadata document lists no redirect_uris");
  const origin = new URL(clientId).origin;
  const refused = redirectUris.find((uri) => !redirectAllowed(uri, origin));
  if (refused) throw new ClientMetadataRefused(`the client metadata document's redirect URI ${refused.slice(0, 200)} is neither https at ${origin} nor http on a loopback address`);
  // RFC 7591 §2.1: grants the server does not offer are ignored, but the code flow must be there
  if (metadata.grant_types && !metadata.grant_types.includes("authorization_code")) throw new ClientMetadataRefused('the client metadata document\'s grant_types lack "authorization_code"');
  if (metadata.response_types && !metadata.response_types.includes("code")) throw new ClientMetadataRefused('the client metadata document\'s response_types lack "code"');
  const name = metadata.client_name?.trim();
  if (name && name.length > 100) throw new ClientMetadataRefused("the client metadata document's client_name is longer than 100 characters");
  return {
    name: name || null,
    uri: httpsOrNull(metadata.client_uri),
    tos: httpsOrNull(metadata.tos_uri),
    policy: httpsOrNull(metadata.policy_uri),
    softwareId: metadata.software_id ?? null,
    softwareVersion: metadata.software_version ?? null,
    redirectUris,
    applicationType: metadata.application_type ?? null,
  };
}

/** An https address kept as the document gave it; anything else (javascript:, data:, junk) is not kept, lest a page ever link it. */
function httpsOrNull(address: string | undefined): string | null {
  if (!address) return null;
  try {
    return new URL(address).protocol === "https:" ? address : null;
  } catch {
    return null;
  }
}

/** How long a fetched document stays fresh (RFC 9111 §5.2.2: max-age; no-store and no-cache mean the shortest). */
export function freshSeconds(cacheControl: string | null): number {
  const directives = (cacheControl ?? "").toLowerCase().split(",").map((d) => d.trim());
  if (directives.some((d) => d === "no-store" || d === "no-cache")) return MIN_FRESH_SECONDS;
  const maxAge = directives.find((d) => d.startsWith("max-age="));
  const seconds = maxAge ? Number(maxAge.slice("max-age=".length)) : NaN;
  if (!Number.isInteger(seconds) || seconds < 0) return DEFAULT_FRESH_SECONDS;
  return Math.min(MAX_FRESH_SECONDS, Math.max(MIN_FRESH_SECONDS, seconds));
}

/** One GET of a document: no redirect, JSON, at most MAX_DOCUMENT_BYTES, within the time limit. */
async function fetchDocument(agent: Agent, url: string, timeoutMs: number): Promise<{ document: unknown; cacheControl: string | null }> {
  let response;
  try {
    response = await fetch(url, { dispatcher: agent, redirect: "manual", headers: { accept: "application/json" }, signal: AbortSignal.timeout(timeoutMs) });
  } catch (err) {
    const cause = (err as { cause?: Error & { code?: string } }).cause;
    if (cause instanceof PrivateAddressRefused) throw new ClientMetadataRefused(`the client metadata document was not fetched: ${cause.message}`);
    if ((err as Error).name === "TimeoutError") throw new ClientMetadataRefused(`the client metadata document's host did not answer within ${timeoutMs} ms`, true);
    throw new ClientMetadataRefused(`the client metadata document could not be fetched (${cause?.code ?? (err as Error).message})`, true);
  }
  try {
    if (response.status >= 300 && response.status < 400) throw new ClientMetadataRefused("the client metadata document's address answered with a redirect, which is not followed");
    if (response.status !== 200) throw new ClientMetadataRefused(`the client metadata document's address answered ${response.status}`, response.status >= 500);
    const type = (response.headers.get("content-type") ?? "").split(";")[0]!.trim().toLowerCase();
    if (type !== "application/json" && !type.endsWith("+json")) throw new ClientMetadataRefused("the client metadata document is not served as application/json");
    if (Number(response.headers.get("content-length") ?? 0) > MAX_DOCUMENT_BYTES) throw new ClientMetadataRefused(`the client metadata document is larger than ${MAX_DOCUMENT_BYTES} bytes`);
    const body = await readAtMost(response.body, MAX_DOCUMENT_BYTES);
    let document: unknown;
    try {
      document = JSON.parse(body);
    } catch {
      throw new ClientMetadataRefused("the client metadata document is not valid JSON");
    }
    return { document, cacheControl: response.headers.get("cache-control") };
  } catch (err) {
    if ((err as Error).name === "TimeoutError" || (err as Error).name === "AbortError") throw new ClientMetadataRefused(`the client metadata document's host did not answer within ${timeoutMs} ms`, true);
    throw err;
  } finally {
    await response.body?.cancel().catch(() => undefined);
  }
}

/** The body as text, refused once it passes `limit` bytes (a missing or false Content-Length changes nothing). */
async function readAtMost(body: AsyncIterable<Uint8Array> | null, limit: number): Promise<string> {
  if (!body) return "";
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += chunk.byteLength;
    if (size > limit) throw new ClientMetadataRefused(`the client metadata document is larger than ${limit} bytes`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString("utf8");
}

export interface ClientMetadataDeps {
  db: Db;
  clock: Clock;
  config: ClientMetadataConfig;
  /** the resources a client is linked to, as dynamic registration links them (the vault) */
  resources: string[];
  /** the scopes a client may ask for, as dynamic registration grants them */
  scopes: string[];
  /** a new client stored from its document, or refused (the audit log's `oauth.client.register`) */
  recordRegistration: (registration: { clientId: string; refused: string | null; headers: Headers | undefined }) => Promise<void>;
}

/**
 * The plugin's client discovery (its public `extensions[].clientDiscovery` hook) for metadata
 * documents: `getClient` asks it for every https client id, with the stored row if there is one.
 */
export function clientMetadataDiscovery(deps: ClientMetadataDeps): ClientDiscovery {
  const { db, clock, config } = deps;
  const agent = webhookAgent({ allowPrivate: config.allowPrivate, ca: config.ca });

  /** Fetches, checks and stores the client; answers the stored row. */
  async function refresh(clientId: string, existing: SchemaClient<Scope[]> | null): Promise<SchemaClient<Scope[]>> {
    const { document, cacheControl } = await fetchDocument(agent, clientId, config.timeoutMs);
    const metadata = acceptedMetadata(clientId, document);
    const now = clock.now();
    const refreshAt = new Date(now.getTime() + freshSeconds(cacheControl) * 1000);
    const row = {
      ...metadata,
      clientId,
      clientDiscoveryId: CLIENT_METADATA_DISCOVERY,
      tokenEndpointAuthMethod: "none",
      grantTypes: ["authorization_code", "refresh_token"],
      responseTypes: ["code"],
      scopes: deps.scopes,
      updatedAt: now,
    };
    return db.transaction(async (tx) => {
      // a row of another origin (a dynamically registered client) is never taken over: the update matches only ours
      const [stored] = existing
        ? await tx
            .update(oauthClient)
            .set(row)
            .where(and(eq(oauthClient.clientId, clientId), eq(oauthClient.clientDiscoveryId, CLIENT_METADATA_DISCOVERY)))
            .returning()
        : await tx
            .insert(oauthClient)
            .values({ ...row, id: randomUUID(), createdAt: now })
            .onConflictDoUpdate({ target: oauthClient.clientId, set: row, setWhere: sql`${oauthClient.clientDiscoveryId} = ${CLIENT_METADATA_DISCOVERY}` })
            .returning();
      if (!stored) throw new ClientMetadataRefused("the client id is registered otherwise");
      for (const resourceId of deps.resources) {
        await tx.insert(oauthClientResource).values({ id: randomUUID(), clientId, resourceId, createdAt: now }).onConflictDoNothing();
      }
      const times = { fetchedAt: now, refreshAt, expiresAt: new Date(refreshAt.getTime() + STALE_IF_UNREACHABLE_MS) };
      await tx.insert(clientMetadataDocuments).values({ clientId, ...times }).onConflictDoUpdate({ target: clientMetadataDocuments.clientId, set: times });
      return stored as unknown as SchemaClient<Scope[]>;
    });
  }

  /** The stored client while its copy is fresh, or while its host is unreachable and the copy has not expired. */
  async function resolve(clientId: string, existing: SchemaClient<Scope[]> | null): Promise<SchemaClient<Scope[]>> {
    const [times] = existing ? await db.select().from(clientMetadataDocuments).where(eq(clientMetadataDocuments.clientId, clientId)) : [];
    const now = clock.now();
    if (existing && times && now < times.refreshAt) return existing;
    try {
      return await refresh(clientId, existing);
    } catch (err) {
      if (!(err instanceof ClientMetadataRefused) || !err.unreachable || !existing || !times || now >= times.expiresAt) throw err;
      await db
        .update(clientMetadataDocuments)
        // never past the copy's expiry: then the host must answer
        .set({ refreshAt: new Date(Math.min(now.getTime() + RETRY_UNREACHABLE_MS, times.expiresAt.getTime())) })
        .where(eq(clientMetadataDocuments.clientId, clientId));
      return existing;
    }
  }

  return {
    id: CLIENT_METADATA_DISCOVERY,
    matches: isClientMetadataUrl,
    resolve: async (ctx, clientId, existing) => {
      const headers = ctx.headers ?? ctx.request?.headers;
      try {
        const client = await resolve(clientId, existing);
        if (!existing) await deps.recordRegistration({ clientId, refused: null, headers });
        return client;
      } catch (err) {
        if (!(err instanceof ClientMetadataRefused)) throw err;
        if (!existing) await deps.recordRegistration({ clientId, refused: err.message, headers });
        // RFC 6749 §4.1.2.1: an unverified client is never redirected to: the browser sees IAM's error page
        if (ctx.path === "/oauth2/authorize") throw ctx.redirect(errorPage(ctx.context.baseURL, err.message));
        throw new APIError("BAD_REQUEST", { error: "invalid_client", error_description: err.message });
      }
    },
    discoveryMetadata: { client_id_metadata_document_supported: true },
  };
}

/** The authorization server's error page (the plugin's, under IAM's auth base path) for a refused client. */
function errorPage(baseURL: string, description: string): string {
  const params = new URLSearchParams({ error: "invalid_client", error_description: description });
  return `${baseURL}/error?${params.toString()}`;
}
