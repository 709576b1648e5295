import { serve, type ServerType } from "@hono/node-server";
import { randomUUID } from "node:crypto";
import type { Duplex } from "node:stream";
import { envelope } from "./errors.js";
import type { Logger } from "./logger.js";

export interface RunningServer {
  url: string;
  port: number;
  close(): Promise<void>;
}

interface Fetchable {
  fetch: (request: Request, ...rest: never[]) => Response | Promise<Response>;
  omitsErrorDetails?: (path: string) => boolean;
}

/** Listens on host:port (port 0 picks a free one) and resolves once the socket is bound. */
export function listen(app: Fetchable, port: number, host: string): Promise<RunningServer> {
  return new Promise((resolve, reject) => {
    let server: ServerType;
    const onError = (err: Error) => reject(err);
    server = serve({ fetch: app.fetch as never, port, hostname: host }, (info) => {
      server.off("error", onError);
      const shownHost = host.includes(":") ? `[${host}]` : host;
      resolve({
        url: `http://${shownHost === "0.0.0.0" ? "127.0.0.1" : shownHost}:${info.port}`,
        port: info.port,
        close: () => closeServer(server),
      });
    });
    server.once("error", onError);
    server.on("clientError", (err: Error & { code?: string; rawPacket?: Buffer }, socket: Duplex) => answerUnparsableRequest(err, socket, app.omitsErrorDetails));
  });
}

/**
 * Requests the HTTP parser refuses before any route runs (a URL or headers beyond its 16 KiB, bytes
 * that are not HTTP) get the error envelope too, instead of Node's bare status line: 431 for
 * headers too large, 400 for anything else.
 */
function answerUnparsableRequest(err: Error & { code?: string; rawPacket?: Buffer }, socket: Duplex, omitsErrorDetails?: (path: string) => boolean): void {
  if (!socket.writable) return void socket.destroy();
  const tooLarge = err.code === "HPE_HEADER_OVERFLOW";
  const [status, reason, code, message] = tooLarge
    ? [431, "Request Header Fields Too Large", "HEADERS_TOO_LARGE", "The request line and headers exceed 16 KiB"]
    : [400, "Bad Request", "BAD_REQUEST", "The request is not valid HTTP"];
  // the routes whose envelopes carry no details keep that rule here too, when the request line can be read
  const path = requestPathOf(err.rawPacket);
  const withDetails = !(path !== null && omitsErrorDetails?.(path));
  const body = JSON.stringify(envelope(code, message, randomUUID(), null, withDetails));
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
}

/** The path of the request line in the bytes the parser refused (`POST /a/b?c HTTP/1.1`), or null. */
function requestPathOf(raw: Buffer | undefined): string | null {
  if (!raw) return null;
  const line = raw.subarray(0, Math.min(raw.length, 65_536)).toString("latin1").split("\r\n", 1)[0]!;
  const target = /^[A-Z]+ (\/[^ ?#]*)/.exec(line)?.[1];
  return target ?? null;
}

/** Stop accepting, let in-flight requests finish (up to 10 s), then drop idle keep-alive sockets. */
function closeServer(server: ServerType): Promise<void> {
  return new Promise((resolve) => {
    const force = setTimeout(() => {
      (server as { closeAllConnections?: () => void }).closeAllConnections?.();
    }, 10_000);
    force.unref();
    server.close(() => {
      clearTimeout(force);
      resolve();
    });
    (server as { closeIdleConnections?: () => void }).closeIdleConnections?.();
  });
}

/**
 * Graceful shutdown on SIGTERM/SIGINT (DESIGN §3): run the closers in order (servers first, then
 * the database), then exit. A second signal exits at once.
 */
export function onShutdown(logger: Logger, closers: (() => Promise<void>)[]): void {
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) process.exit(1);
    stopping = true;
    logger.info({ signal }, "shutting down");
    for (const close of closers) {
      try {
        await close();
      } catch (err) {
        logger.error({ err: (err as Error).message }, "error during shutdown");
      }
    }
    process.exit(0);
  };
  process.once("SIGTERM", () => void stop("SIGTERM"));
  process.once("SIGINT", () => void stop("SIGINT"));
}
