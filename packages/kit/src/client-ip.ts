import { getConnInfo } from "@hono/node-server/conninfo";
import type { Context } from "hono";

/**
 * The client's address: the socket's, or with CORE_TRUST_PROXY=1 the first X-Forwarded-For entry
 * (behind a proxy that sets it). Worked out once per request, and only when something needs it.
 */
export function clientIpOf(c: Context, trustProxy = process.env.CORE_TRUST_PROXY === "1"): string {
  const memo = c.get("core:client-ip" as never) as string | undefined;
  if (memo) return memo;
  let ip = "127.0.0.1";
  try {
    ip = getConnInfo(c).remote.address ?? ip;
  } catch {
    // in-process requests (tests) have no socket
  }
  if (trustProxy) ip = c.req.header("x-forwarded-for")?.split(",")[0]?.trim() || ip;
  c.set("core:client-ip" as never, ip as never);
  return ip;
}
