import { createHmac } from "node:crypto";
import { lookup, type LookupAddress, type LookupOptions } from "node:dns";
import { BlockList, isIP } from "node:net";
import { Agent, buildConnector, fetch } from "undici";
import { and, eq, inArray, isNotNull, lte, min, sql } from "drizzle-orm";
import { unixSeconds, type Clock, type Logger } from "@core/kit";
import { rowsOf, type Db } from "@core/storage";
import { webhookAttempts, webhookDeliveries, webhookEndpoints, webhookEvents, type WebhookEndpointRow, type WebhookEventRow } from "../db/schema.js";

/** Deliveries are retried for up to three days after their first attempt (DESIGN §6.8). */
export const RETRY_FOR_MS = 3 * 24 * 3600_000;
/** The first retry after a minute, doubling, at most six hours apart: about 17 attempts in three days. */
export const FIRST_RETRY_MS = 60_000;
export const LONGEST_RETRY_MS = 6 * 3600_000;
/** An endpoint has this long to answer an attempt. */
export const ATTEMPT_TIMEOUT_MS = 10_000;
/** A claimed delivery is this dispatcher's for this long: well past the attempt's timeout. */
const LEASE_MS = 60_000;
/** Deliveries one pass claims at a time. */
const BATCH = 10;

/** How long to wait after the `attempt`-th failure (1-based): doubling from a minute, at most six hours. */
export function retryDelayMs(attempt: number): number {
  return Math.min(FIRST_RETRY_MS * 2 ** Math.max(0, attempt - 1), LONGEST_RETRY_MS);
}

/**
 * `Core-Signature: t=<unix>,v1=<hex>`: HMAC-SHA256 of `<t>.<body>` with the endpoint's secret, like
 * Stripe's. Each attempt is signed afresh, so `t` is when it was sent (wall-clock time). During a
 * secret rotation's grace there is one `v1` per active secret, the current one first
 * (`t=<unix>,v1=<new>,v1=<old>`, as Stripe sends several): a receiver accepts a delivery when one of
 * them matches its secret.
 */
export function signPayload(secrets: readonly string[], timestamp: number, body: string): string {
  return [`t=${timestamp}`, ...secrets.map((secret) => `v1=${createHmac("sha256", secret).update(`${timestamp}.${body}`).digest("hex")}`)].join(",");
}

/** The secrets a delivery sent at `at` is signed with: the current one, and the previous one while it is active. */
export function signingSecrets(endpoint: WebhookEndpointRow, at: Date): string[] {
  const previousActive = endpoint.previousSecret !== null && endpoint.previousSecretExpiresAt !== null && endpoint.previousSecretExpiresAt.getTime() > at.getTime();
  return previousActive ? [endpoint.secret, endpoint.previousSecret!] : [endpoint.secret];
}

/** Forgets previous secrets that have expired: a secret that signs nothing is not kept. */
export async function forgetExpiredSecrets(db: Db, now: Date): Promise<void> {
  await db
    .update(webhookEndpoints)
    .set({ previousSecret: null })
    .where(and(isNotNull(webhookEndpoints.previousSecret), lte(webhookEndpoints.previousSecretExpiresAt, now)));
}

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
 * The HTTP agent webhook deliveries go through (DESIGN §10): the address is checked where the
 * connection is made, by the lookup the socket itself uses, so a name whose answer changes between a
 * check and the connection (DNS rebinding) cannot reach inside; an address written in the URL is
 * checked before connecting. With `allowPrivate` nothing is refused (development).
 */
export function webhookAgent(options: { allowPrivate: boolean; resolve?: Resolver }): Agent {
  const { allowPrivate, resolve } = options;
  const guardedLookup = (hostname: string, lookupOptions: LookupOptions, callback: (err: Error | null, address: string | LookupAddress[], family?: number) => void) => {
    const answered = (err: Error | null, found: LookupAddress[]) => {
      if (err) return callback(err, []);
      const addresses = found.filter((a) => !lookupOptions.family || a.family === lookupOptions.family);
      const refused = allowPrivate ? undefined : addresses.find((a) => isPrivateAddress(a.address));
      if (refused) return callback(new PrivateAddressRefused(hostname, refused.address), []);
      if (addresses.length === 0) return callback(Object.assign(new Error(`${hostname} has no address`), { code: "ENOTFOUND" }), []);
      if (lookupOptions.all) return callback(null, addresses);
      callback(null, addresses[0]!.address, addresses[0]!.family);
    };
    if (!resolve) return lookup(hostname, { all: true, family: lookupOptions.family ?? 0 }, answered);
    resolve(hostname).then(
      (found) => answered(null, found.map((address) => ({ address, family: isIP(address) }))),
      (err: Error) => answered(err, []),
    );
  };
  const connector = buildConnector({ lookup: guardedLookup as never });
  return new Agent({
    connect: (connectOptions, callback) => {
      // an address in the URL is not looked up: it is checked here
      const host = connectOptions.hostname.replace(/^\[|\]$/g, "");
      if (!allowPrivate && isIP(host) && isPrivateAddress(host)) return callback(new PrivateAddressRefused(host, host), null);
      connector(connectOptions, callback);
    },
  });
}

export interface DispatcherOptions {
  /** loopback and private addresses may be reached (development; CORE_BILLING_WEBHOOK_ALLOW_PRIVATE) */
  allowPrivate: boolean;
  timeoutMs?: number;
  /** the resolver the connection's lookup asks (tests give one that answers a private address for a public-looking name) */
  resolve?: Resolver;
  /** told of each delivery given up (core_billing_webhook_deliveries_failed_total) */
  givenUp?: () => void;
}

interface Claimed {
  id: string;
  event_id: string;
  endpoint_id: string;
  attempts: number;
  lease_until: string;
}

/**
 * Sends the outbox's pending deliveries (DESIGN §6.8). Every replica runs one in its worker: a pass
 * claims due deliveries with `FOR UPDATE SKIP LOCKED`, numbering the attempt in the same statement,
 * so two dispatchers never send the same attempt; each attempt is signed when it is sent, recorded
 * with the endpoint's answer, and a failure is retried with backoff until three days have passed.
 */
export class WebhookDispatcher {
  private readonly timeoutMs: number;
  private readonly agent: Agent;

  constructor(
    private readonly db: Db,
    /** wall-clock time: when attempts are due, and each signature's `t` */
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly options: DispatcherOptions,
  ) {
    this.timeoutMs = options.timeoutMs ?? ATTEMPT_TIMEOUT_MS;
    this.agent = webhookAgent(options);
  }

  /** Sends what is due now; answers how many attempts were made. */
  async pass(): Promise<number> {
    await forgetExpiredSecrets(this.db, this.clock.now());
    let sent = 0;
    for (;;) {
      const claimed = await this.claim();
      if (claimed.length === 0) return sent;
      // the claimed deliveries' events and endpoints in two queries, not two per delivery
      const events = new Map((await this.db.select().from(webhookEvents).where(inArray(webhookEvents.id, claimed.map((d) => d.event_id)))).map((e) => [e.id, e]));
      const endpoints = new Map((await this.db.select().from(webhookEndpoints).where(inArray(webhookEndpoints.id, claimed.map((d) => d.endpoint_id)))).map((e) => [e.id, e]));
      await Promise.all(claimed.map((delivery) => this.attempt(delivery, events.get(delivery.event_id), endpoints.get(delivery.endpoint_id))));
      sent += claimed.length;
    }
  }

  private async claim(): Promise<Claimed[]> {
    const now = this.clock.now();
    const leaseUntil = new Date(now.getTime() + LEASE_MS);
    return rowsOf<Claimed>(
      await this.db.execute(sql`
        update billing.webhook_deliveries set attempts = attempts + 1, lease_until = ${leaseUntil.toISOString()}::timestamptz
         where id in (
           select id from billing.webhook_deliveries
            where status = 'pending' and next_attempt_at <= ${now.toISOString()}::timestamptz
              and (lease_until is null or lease_until < ${now.toISOString()}::timestamptz)
            order by next_attempt_at, id
            limit ${BATCH}
            for update skip locked)
        returning id, event_id, endpoint_id, attempts, lease_until`),
    );
  }

  private async attempt(delivery: Claimed, event: WebhookEventRow | undefined, endpoint: WebhookEndpointRow | undefined): Promise<void> {
    const started = this.clock.now();
    if (!event || !endpoint || endpoint.disabledAt) {
      await this.finish(delivery, started, { status: null, response: "not sent: the endpoint was deleted", durationMs: 0 }, "failed");
      return;
    }
    const body = JSON.stringify({ id: event.id, type: event.type, createdAt: unixSeconds(event.createdAt), data: event.data });
    const answer = await this.send(endpoint.url, signingSecrets(endpoint, started), event.id, body, started);
    const ok = answer.status !== null && answer.status >= 200 && answer.status < 300;
    if (ok) {
      await this.finish(delivery, started, answer, "delivered");
      return;
    }
    // three days from the first attempt, then it is given up on (and stays readable)
    const [first] = await this.db.select({ at: min(webhookAttempts.at) }).from(webhookAttempts).where(eq(webhookAttempts.deliveryId, delivery.id));
    const firstAt = first?.at ?? started;
    const next = new Date(started.getTime() + retryDelayMs(delivery.attempts));
    const giveUp = next.getTime() - firstAt.getTime() > RETRY_FOR_MS;
    await this.finish(delivery, started, answer, giveUp ? "failed" : "pending", next);
    if (giveUp) this.logger.warn({ deliveryId: delivery.id, endpointId: endpoint.id, eventId: event.id, attempts: delivery.attempts }, "webhook delivery given up after three days");
  }

  /** One POST, signed now; never throws: no answer is an answer too. */
  private async send(url: string, secrets: string[], eventId: string, body: string, at: Date): Promise<{ status: number | null; response: string; durationMs: number }> {
    const began = performance.now();
    const took = () => Math.round(performance.now() - began);
    try {
      // a redirect is the endpoint's answer, never followed: its address would be another place to reach.
      // No traceparent: the endpoint is an operator's or tenant's, not one of our services (ADR 0020)
      const res = await fetch(url, {
        dispatcher: this.agent,
        method: "POST",
        redirect: "manual",
        headers: {
          "content-type": "application/json",
          "user-agent": "core-billing-webhooks/1",
          "core-event-id": eventId,
          "core-signature": signPayload(secrets, Math.floor(at.getTime() / 1000), body),
        },
        body,
        signal: AbortSignal.timeout(this.timeoutMs),
      });
      const text = await res.text().catch(() => "");
      return { status: res.status, response: text.slice(0, 500), durationMs: took() };
    } catch (err) {
      const cause = (err as { cause?: Error & { code?: string } }).cause;
      const why =
        (err as Error).name === "TimeoutError"
          ? `no answer within ${this.timeoutMs} ms`
          : cause instanceof PrivateAddressRefused
            ? `not sent: ${cause.message} (CORE_BILLING_WEBHOOK_ALLOW_PRIVATE)`
            : `not delivered: ${cause?.code ?? (err as Error).message}`;
      return { status: null, response: why, durationMs: took() };
    }
  }

  /** Records the attempt and the delivery's new state, if the lease is still this dispatcher's. */
  private async finish(delivery: Claimed, at: Date, answer: { status: number | null; response: string; durationMs: number }, state: "pending" | "delivered" | "failed", next?: Date) {
    const settled = await this.db.transaction(async (tx) => {
      const [held] = await tx
        .update(webhookDeliveries)
        .set({
          status: state,
          leaseUntil: null,
          ...(next && state === "pending" && { nextAttemptAt: next }),
          ...(state !== "pending" && { finishedAt: at }),
        })
        .where(and(eq(webhookDeliveries.id, delivery.id), eq(webhookDeliveries.attempts, delivery.attempts)))
        .returning({ id: webhookDeliveries.id });
      // a dispatcher that stalled past its lease records what it sent, and leaves the state to the newer claim
      if (!held) this.logger.warn({ deliveryId: delivery.id, attempt: delivery.attempts }, "webhook attempt finished after its lease");
      await tx.insert(webhookAttempts).values({ deliveryId: delivery.id, attempt: delivery.attempts, at, status: answer.status, response: answer.response, durationMs: answer.durationMs }).onConflictDoNothing();
      return held !== undefined;
    });
    if (settled && state === "failed") this.options.givenUp?.();
  }
}
