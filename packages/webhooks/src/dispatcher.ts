import { and, eq, inArray, min, sql } from "drizzle-orm";
import { fetch, type Agent } from "undici";
import { unixSeconds, type Clock, type Logger } from "@core/kit";
import { rowsOf, type Db } from "@core/storage";
import { PrivateAddressRefused, webhookAgent, type Resolver } from "./address.js";
import { forgetExpiredSecrets, signPayload, signingSecrets } from "./signing.js";
import type { WebhookEndpointRow, WebhookEventRow, WebhookTables } from "./tables.js";

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

export interface DispatcherOptions {
  /** loopback and private addresses may be reached (development; CORE_BILLING_WEBHOOK_ALLOW_PRIVATE, CORE_IAM_WEBHOOK_ALLOW_PRIVATE) */
  allowPrivate: boolean;
  timeoutMs?: number;
  /** the resolver the connection's lookup asks (tests give one that answers a private address for a public-looking name) */
  resolve?: Resolver;
  /** told of each delivery given up (billing: core_billing_webhook_deliveries_failed_total) */
  givenUp?: () => void;
}

/** Who sends: names the deliveries' User-Agent (`core-<service>-webhooks/1`) and the setting that allows private addresses in the answers recorded. */
export interface DispatcherIdentity {
  service: string;
  allowPrivateSetting: string;
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
    /** the service's own tables (webhookTables of its schema) */
    private readonly tables: WebhookTables,
    private readonly identity: DispatcherIdentity,
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
    await forgetExpiredSecrets(this.db, this.tables, this.clock.now());
    const { webhookEvents, webhookEndpoints } = this.tables;
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
        update ${this.tables.webhookDeliveries} set attempts = attempts + 1, lease_until = ${leaseUntil.toISOString()}::timestamptz
         where id in (
           select id from ${this.tables.webhookDeliveries}
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
    const { webhookAttempts } = this.tables;
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
          "user-agent": `core-${this.identity.service}-webhooks/1`,
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
            ? `not sent: ${cause.message} (${this.identity.allowPrivateSetting})`
            : `not delivered: ${cause?.code ?? (err as Error).message}`;
      return { status: null, response: why, durationMs: took() };
    }
  }

  /** Records the attempt and the delivery's new state, if the lease is still this dispatcher's. */
  private async finish(delivery: Claimed, at: Date, answer: { status: number | null; response: string; durationMs: number }, state: "pending" | "delivered" | "failed", next?: Date) {
    const { webhookDeliveries, webhookAttempts } = this.tables;
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
