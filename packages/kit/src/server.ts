import { serve, type ServerType } from "@hono/node-server";
import type { Logger } from "./logger.js";

export interface RunningServer {
  url: string;
  port: number;
  close(): Promise<void>;
}

interface Fetchable {
  fetch: (request: Request, ...rest: never[]) => Response | Promise<Response>;
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
  });
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
