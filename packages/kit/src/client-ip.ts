import { getConnInfo } from "@hono/node-server/conninfo";
import type { Context } from "hono";
import { ConfigError } from "./config.js";

/** More proxies than this in front of a service is a typing error, not a deployment. */
const MOST_PROXIES = 16;

/**
 * `CORE_TRUST_PROXY`: how many proxies of our own stand in front of the service (0 or unset: none).
 * Anything but a whole number from 0 to 16 is a ConfigError naming the variable and the value.
 */
export function trustedProxyHops(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env.CORE_TRUST_PROXY?.trim();
  if (raw === undefined || raw === "") return 0;
  const hops = /^\d{1,2}$/.test(raw) ? Number(raw) : NaN;
  if (!(hops >= 0 && hops <= MOST_PROXIES)) {
    throw new ConfigError(`CORE_TRUST_PROXY must be the number of proxies in front of the service, 0 to ${MOST_PROXIES}, got "${env.CORE_TRUST_PROXY}"`);
  }
  return hops;
}

/**
 * The client's address as `hops` trusted proxies saw it (DESIGN §10). Each proxy appends the address
 * it was reached from to `X-Forwarded-For`, so only the last `hops` entries were written by our
 * proxies; the client's address is the entry the first of them wrote, `hops` from the right.
 * Everything to its left the client wrote itself and is never read. With fewer entries than
 * `hops` the request met fewer proxies (it entered the chain part-way): the leftmost entry is still
 * one a proxy of ours wrote, the address it was reached from. No entry: the socket's address.
 */
export function forwardedClient(forwardedFor: string | undefined, hops: number, socket: string): string {
  if (hops === 0 || !forwardedFor) return socket;
  const entries = forwardedFor.split(",").map((entry) => entry.trim());
  return entries[Math.max(0, entries.length - hops)] || socket;
}

/**
 * The client's address: the socket's, or behind `CORE_TRUST_PROXY=<n>` proxies the address the
 * first of them saw (`forwardedClient`). Worked out once per request, and only when something
 * needs it.
 */
export function clientIpOf(c: Context, hops = trustedProxyHops()): string {
  const memo = c.get("core:client-ip" as never) as string | undefined;
  if (memo) return memo;
  let socket = "127.0.0.1";
  try {
    socket = getConnInfo(c).remote.address ?? socket;
  } catch {
    // in-process requests (tests) have no socket
  }
  const ip = forwardedClient(c.req.header("x-forwarded-for"), hops, socket);
  c.set("core:client-ip" as never, ip as never);
  return ip;
}
