import { randomUUID } from "node:crypto";
import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import { systemClock, type Clock } from "@core/kit";
import { answerStatelessly, createMcpServer, withFullAccept } from "./mcp.js";
import { resourceUri } from "./resources.js";
import type { DocumentChanges, Vault } from "./vault.js";

/** Sessions one process holds at once; the least recently used one is ended to make room for a new one. */
export const MAX_SESSIONS = 1_000;
/** Sessions one person holds at once (with auth): their own least recently used one makes room, never another's. */
export const MAX_SESSIONS_PER_PERSON = 16;
/** A session with no request and no open stream for this long is ended. */
export const SESSION_IDLE_MS = 30 * 60_000;
/** how often idle sessions are looked for */
const SWEEP_MS = 60_000;

/**
 * Methods whose answer depends on the session: a POST naming a session this process does not hold
 * (another replica's, or one ended) is still answered when it sends none of them (ADR 0028).
 */
const SESSION_METHODS = new Set(["initialize", "resources/subscribe", "resources/unsubscribe"]);

export interface McpSessionsOptions {
  clock?: Clock;
  maxSessions?: number;
  maxSessionsPerPerson?: number;
  idleMs?: number;
}

interface Session {
  id: string;
  /** who opened it (a user id), or null when the vault runs without auth */
  owner: string | null;
  server: McpServer;
  transport: WebStandardStreamableHTTPServerTransport;
  /** vault paths of the documents it subscribed to */
  subscriptions: Set<string>;
  lastSeen: number;
  /** open `GET` streams (one at most, the SDK's rule): a session listening is not idle */
  streams: number;
}

const methodsOf = (body: unknown): string[] =>
  (Array.isArray(body) ? body : [body]).map((message) => (typeof message === "object" && message !== null && typeof (message as { method?: unknown }).method === "string" ? (message as { method: string }).method : ""));

/** The JSON-RPC error answers of the Streamable HTTP transport (MCP 2025-06-18, Transports §Session Management). */
function transportError(status: number, code: number, message: string): Response {
  return Response.json({ jsonrpc: "2.0", error: { code, message }, id: null }, { status });
}
const sessionNotFound = () => transportError(404, -32001, "Session not found");

/**
 * The vault's MCP endpoint (issue 29): stateful Streamable HTTP sessions for the clients that want
 * change notifications, beside the stateless answers every other request gets (spec §4.7).
 * `initialize` opens a session (its `Mcp-Session-Id`), `GET` opens its notification stream, `DELETE`
 * ends it. Sessions live in this process's memory, bounded in number and idle time, each bound to
 * the person who opened it: another person naming it is answered as if it did not exist (404).
 */
export class McpSessions {
  private readonly sessions = new Map<string, Session>();
  private readonly clock: Clock;
  private readonly maxSessions: number;
  private readonly maxPerPerson: number;
  private readonly idleMs: number;
  private readonly stopWatching: () => void;
  private readonly sweeper: NodeJS.Timeout;

  constructor(
    private readonly vault: Vault,
    options: McpSessionsOptions = {},
  ) {
    this.clock = options.clock ?? systemClock;
    this.maxSessions = options.maxSessions ?? MAX_SESSIONS;
    this.maxPerPerson = options.maxSessionsPerPerson ?? MAX_SESSIONS_PER_PERSON;
    this.idleMs = options.idleMs ?? SESSION_IDLE_MS;
    this.stopWatching = vault.onChange((changes) => this.notify(changes));
    this.sweeper = setInterval(() => this.sweep(), SWEEP_MS);
    this.sweeper.unref();
  }

  /** How many sessions this process holds. */
  get size(): number {
    return this.sessions.size;
  }

  /** How many of them have their notification stream open. */
  get listening(): number {
    let open = 0;
    for (const session of this.sessions.values()) if (session.streams > 0) open++;
    return open;
  }

  /** Answers a request to `/mcp` from `owner` (the reader's user id; null without auth). */
  async answer(request: Request, owner: string | null): Promise<Response> {
    const sessionId = request.headers.get("mcp-session-id");
    if (request.method !== "POST") {
      if (!sessionId) return transportError(400, -32000, "Bad Request: Mcp-Session-Id header is required");
      const session = this.held(sessionId, owner);
      return session ? this.serve(session, withFullAccept(request, undefined), undefined) : sessionNotFound();
    }
    const text = await request.text();
    const forwarded = withFullAccept(request, text);
    const body = parsed(text);
    const methods = body === undefined ? [] : methodsOf(body);
    if (!sessionId) return methods.includes("initialize") ? this.open(forwarded, body, owner) : answerStatelessly(this.vault, forwarded, body);
    const session = this.held(sessionId, owner);
    if (session) return this.serve(session, forwarded, body);
    // tools, reads and prompts need nothing the session holds: any replica answers them
    return methods.some((method) => SESSION_METHODS.has(method)) ? sessionNotFound() : answerStatelessly(this.vault, forwarded, body);
  }

  /** Ends every session and stops watching the vault. */
  async close(): Promise<void> {
    clearInterval(this.sweeper);
    this.stopWatching();
    await Promise.all([...this.sessions.values()].map((session) => this.end(session)));
  }

  /** Ends the sessions idle for longer than allowed (run by a timer, and before a session opens). */
  sweep(): void {
    const cutoff = this.clock.now().getTime() - this.idleMs;
    for (const session of this.sessions.values()) if (session.streams === 0 && session.lastSeen < cutoff) void this.end(session);
  }

  private held(sessionId: string, owner: string | null): Session | undefined {
    const session = this.sessions.get(sessionId);
    return session && session.owner === owner ? session : undefined;
  }

  private async open(request: Request, body: unknown, owner: string | null): Promise<Response> {
    this.sweep();
    // the least recently used session makes room (the map keeps sessions in order of use): the
    // person's own first, so that one person opening many ends none of anyone else's
    const own = owner === null ? [] : [...this.sessions.values()].filter((session) => session.owner === owner);
    if (own.length >= this.maxPerPerson) await this.end(own[0]!);
    else if (this.sessions.size >= this.maxSessions) await this.end(this.sessions.values().next().value!);
    const session = { id: "", owner, subscriptions: new Set<string>(), lastSeen: this.clock.now().getTime(), streams: 0 } as Session;
    session.transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      enableJsonResponse: true,
      onsessioninitialized: (id) => {
        session.id = id;
        this.sessions.set(id, session);
      },
    });
    // DELETE, a close of ours or of the SDK's: the session is gone
    session.transport.onclose = () => {
      if (this.sessions.get(session.id) === session) this.sessions.delete(session.id);
    };
    session.server = createMcpServer(this.vault, session.subscriptions);
    await session.server.connect(session.transport);
    const response = await session.transport.handleRequest(request, { parsedBody: body });
    if (!session.id) await session.server.close(); // the initialize was refused: nothing to keep
    return response;
  }

  private async serve(session: Session, request: Request, body: unknown): Promise<Response> {
    session.lastSeen = this.clock.now().getTime();
    this.sessions.delete(session.id);
    this.sessions.set(session.id, session);
    const response = await session.transport.handleRequest(request, body === undefined ? undefined : { parsedBody: body });
    return request.method === "GET" && response.ok && response.body ? this.countedStream(session, response) : response;
  }

  /** The session's notification stream, counted while it is open so that a listening session is never idle. */
  private countedStream(session: Session, response: Response): Response {
    const reader = response.body!.getReader();
    let open = true;
    const closed = () => {
      if (!open) return;
      open = false;
      session.streams--;
      session.lastSeen = this.clock.now().getTime();
    };
    session.streams++;
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        const { done, value } = await reader.read().catch(() => ({ done: true as const, value: undefined }));
        if (done) {
          closed();
          controller.close();
        } else controller.enqueue(value);
      },
      cancel(reason) {
        closed();
        return reader.cancel(reason);
      },
    });
    return new Response(body, { status: response.status, headers: response.headers });
  }

  /** Tells each session about the documents it subscribed to, and every session that the list changed. */
  private notify(changes: DocumentChanges): void {
    const touched = new Set([...changes.changed, ...changes.removed]);
    const listChanged = changes.added.length + changes.removed.length > 0;
    for (const session of this.sessions.values()) {
      for (const path of session.subscriptions) {
        if (touched.has(path)) session.server.server.sendResourceUpdated({ uri: resourceUri(path) }).catch(() => {});
      }
      if (listChanged) session.server.sendResourceListChanged();
    }
  }

  private async end(session: Session): Promise<void> {
    this.sessions.delete(session.id);
    await session.server.close().catch(() => {});
  }
}

function parsed(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined; // the transport answers the parse error
  }
}
