import { lookup, type LookupAddress, type LookupOptions } from "node:dns";
import { BlockList, isIP } from "node:net";
import { Agent, buildConnector } from "undici";

/**
 * Loopback, private, link-local, unique-local, CGNAT, multicast, unspecified and reserved addresses a
 * webhook may not reach (SSRF), unless allowed. IPv4-mapped and NAT64-style IPv6 forms of them are
 * checked as the IPv4 address they carry.
 */
const PRIVATE = new BlockList();
for (const [net, prefix] of [
  ["0.0.0.0", 8],
  ["10.0.0.0", 8],
  ["100.64.0.0", 10],
  ["127.0.0.0", 8],
  ["169.254.0.0", 16],
  ["172.16.0.0", 12],
  ["192.0.0.0", 24],
  ["192.168.0.0", 16],
  ["198.18.0.0", 15],
  ["224.0.0.0", 4],
  ["240.0.0.0", 4],
] as const)
  PRIVATE.addSubnet(net, prefix, "ipv4");
for (const [net, prefix] of [
  ["::", 128],
  ["::1", 128],
  ["fc00::", 7],
  ["fe80::", 10],
  ["fec0::", 10],
  ["ff00::", 8],
] as const)
  PRIVATE.addSubnet(net, prefix, "ipv6");

/** The IPv4 address an IPv6 address carries in its last 32 bits: IPv4-mapped, -compatible, NAT64 (RFC 6052). */
const CARRIES_IPV4 = new BlockList();
CARRIES_IPV4.addSubnet("::ffff:0:0", 96, "ipv6");
CARRIES_IPV4.addSubnet("::", 96, "ipv6");
CARRIES_IPV4.addSubnet("64:ff9b::", 96, "ipv6");
CARRIES_IPV4.addSubnet("64:ff9b:1::", 48, "ipv6");

export function isPrivateAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return PRIVATE.check(address, "ipv4");
  if (family === 6) {
    if (PRIVATE.check(address, "ipv6")) return true;
    return CARRIES_IPV4.check(address, "ipv6") && PRIVATE.check(lastIpv4(address), "ipv4");
  }
  return true;
}

/**
 * Whether a URL's hostname names a loopback or private address without any lookup: `localhost` and
 * its subdomains (RFC 6761 §6.3), or such an address written as the hostname (brackets allowed).
 */
export function namesPrivateAddress(hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, "").toLowerCase();
  return host === "localhost" || host.endsWith(".localhost") || (isIP(host) !== 0 && isPrivateAddress(host));
}

/** The last 32 bits of an IPv6 address, written as IPv4 (`::ffff:7f00:1` and `::ffff:127.0.0.1` both give 127.0.0.1). */
function lastIpv4(address: string): string {
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(address);
  if (dotted) return dotted[1]!;
  const groups = address.split(":");
  const [high, low] = [parseInt(groups.at(-2) || "0", 16), parseInt(groups.at(-1) || "0", 16)];
  return [high >> 8, high & 255, low >> 8, low & 255].join(".");
}

/** Answers the addresses a name has (tests give one that answers what they need). */
export type Resolver = (hostname: string) => Promise<string[]>;

/** A connection refused because its address is loopback or private (DESIGN §10). */
export class PrivateAddressRefused extends Error {
  readonly code = "ERR_WEBHOOK_PRIVATE_ADDRESS";
  constructor(
    readonly hostname: string,
    readonly address: string,
  ) {
    super(hostname === address ? `${address} is a loopback or private address` : `${hostname} resolves to ${address}, a loopback or private address`);
  }
}

/**
 * The addresses `hostname` has, looked up as the guarded connection looks them up (the resolver
 * given, else the system's), of `family` when one is asked for. Refused as a whole when one of them
 * is loopback or private (unless `allowPrivate`): `PrivateAddressRefused`. An address written as the
 * hostname is checked as it is. Callers that need no connection (a check of an address before it
 * is stored) ask this; the agent below asks it for every connection.
 */
export async function guardedAddresses(hostname: string, options: { allowPrivate: boolean; resolve?: Resolver; family?: number }): Promise<LookupAddress[]> {
  const { allowPrivate, resolve, family = 0 } = options;
  const host = hostname.replace(/^\[|\]$/g, "");
  const found: LookupAddress[] = isIP(host)
    ? [{ address: host, family: isIP(host) }]
    : resolve
      ? (await resolve(host)).map((address) => ({ address, family: isIP(address) }))
      : await lookupAll(host, family);
  const addresses = found.filter((a) => !family || a.family === family);
  const refused = allowPrivate ? undefined : addresses.find((a) => isPrivateAddress(a.address));
  if (refused) throw new PrivateAddressRefused(host, refused.address);
  if (addresses.length === 0) throw Object.assign(new Error(`${host} has no address`), { code: "ENOTFOUND" });
  return addresses;
}

/** The address family a lookup asks for, as a number (0: either). */
const familyOf = (family: LookupOptions["family"]) => (family === 4 || family === "IPv4" ? 4 : family === 6 || family === "IPv6" ? 6 : 0);

const lookupAll = (hostname: string, family: number) =>
  new Promise<LookupAddress[]>((resolve, reject) => lookup(hostname, { all: true, family }, (err, found) => (err ? reject(err) : resolve(found))));

/**
 * The HTTP agent webhook deliveries go through (DESIGN §10): the address is checked where the
 * connection is made, by the lookup the socket itself uses, so a name whose answer changes between a
 * check and the connection (DNS rebinding) cannot reach inside; an address written in the URL is
 * checked before connecting. With `allowPrivate` nothing is refused (development). `ca` replaces the
 * trusted certificate authorities (tests serving https with a certificate of their own). `timeoutMs`
 * bounds the connection, the wait for an answer's headers and each pause in its body, for callers
 * that cannot pass a signal of their own (undici's defaults otherwise).
 */
export function webhookAgent(options: { allowPrivate: boolean; resolve?: Resolver; ca?: string; timeoutMs?: number }): Agent {
  const { allowPrivate, resolve, ca, timeoutMs } = options;
  const guardedLookup = (hostname: string, lookupOptions: LookupOptions, callback: (err: Error | null, address: string | LookupAddress[], family?: number) => void) => {
    guardedAddresses(hostname, { allowPrivate, resolve, family: familyOf(lookupOptions.family) }).then(
      (addresses) => (lookupOptions.all ? callback(null, addresses) : callback(null, addresses[0]!.address, addresses[0]!.family)),
      (err: Error) => callback(err, []),
    );
  };
  const connector = buildConnector({ lookup: guardedLookup as never, ...(ca && { ca }), ...(timeoutMs && { timeout: timeoutMs }) });
  return new Agent({
    ...(timeoutMs && { headersTimeout: timeoutMs, bodyTimeout: timeoutMs }),
    connect: (connectOptions, callback) => {
      // an address in the URL is not looked up: it is checked here
      const host = connectOptions.hostname.replace(/^\[|\]$/g, "");
      if (!allowPrivate && isIP(host) && isPrivateAddress(host)) return callback(new PrivateAddressRefused(host, host), null);
      connector(connectOptions, callback);
    },
  });
}
