import { randomBytes } from "node:crypto";
import { isIP } from "node:net";
import { and, count, eq, inArray, isNull, type SQL } from "drizzle-orm";
import { ApiError, decodeCursor, newId, notFound, toPage, unixSeconds } from "@core/kit";
import { keysetAfter, keysetOrder, type Db, type KeysetColumns } from "@core/storage";
import { isPrivateAddress } from "./address.js";
import type { WebhookEndpointRow, WebhookTables } from "./tables.js";

/** How many endpoints a service keeps enabled at once (in one scope): each event is one delivery per endpoint. */
export const MAX_ENDPOINTS = 50;

/** How long the old secret keeps signing after a rotation by default, and at most (a week, as Stripe's dashboard offers when rolling a secret). */
export const ROTATION_GRACE_SECONDS = 86_400;
export const MAX_ROTATION_GRACE_SECONDS = 7 * 86_400;

export interface NewEndpoint {
  url: string;
  /** the event types it takes; absent: all of them */
  events?: string[];
  description?: string;
}

/**
 * The service an endpoint operation runs for: its tables, the setting that lets endpoints reach
 * private addresses (named in refusals), and optionally a scope: a condition on the endpoints table
 * that an endpoint must meet to be seen, changed or counted (IAM: one organization's endpoints). An
 * endpoint outside the scope is not found, as a missing one.
 */
export interface EndpointStore {
  db: Db;
  tables: WebhookTables;
  service: string;
  allowPrivateSetting: string;
  scope?: SQL;
}

/**
 * An endpoint in its answer's shape: never its secret (nor the previous one), which only the answer
 * that made it shows. `previousSecretExpiresAt`: when the secret before the last rotation stops
 * signing (null when it was never rotated).
 */
export function endpointJson(row: WebhookEndpointRow) {
  return {
    id: row.id,
    url: row.url,
    events: row.events ?? null,
    description: row.description,
    createdAt: unixSeconds(row.createdAt),
    previousSecretExpiresAt: row.previousSecretExpiresAt ? unixSeconds(row.previousSecretExpiresAt) : null,
  };
}

const newSecret = () => `whsec_${randomBytes(32).toString("base64url")}`;

/**
 * Registers an endpoint (DESIGN §6.8), with a new signing secret; refused when it names a loopback
 * or private address (unless allowed), or when `MAX_ENDPOINTS` are enabled in the store's scope.
 * `columns`: the service's own columns of the row (IAM: its organization).
 */
export async function registerWebhookEndpoint(store: EndpointStore, now: Date, input: NewEndpoint, allowPrivate: boolean, columns: Record<string, unknown> = {}): Promise<WebhookEndpointRow> {
  const { db, tables } = store;
  const { webhookEndpoints } = tables;
  refusePrivate(store, input.url, allowPrivate);
  const [enabled] = await db.select({ n: count() }).from(webhookEndpoints).where(and(isNull(webhookEndpoints.disabledAt), store.scope));
  if ((enabled?.n ?? 0) >= MAX_ENDPOINTS) throw new ApiError(409, "TOO_MANY_ENDPOINTS", `At most ${MAX_ENDPOINTS} endpoints: delete one first`);
  const [row] = await db
    .insert(webhookEndpoints)
    .values({ ...columns, id: newId("we"), url: input.url, events: input.events ?? null, description: input.description ?? null, secret: newSecret(), createdAt: now })
    .returning();
  return row!;
}

/** The endpoints registered now (in the store's scope), oldest first. */
export async function enabledWebhookEndpoints(store: EndpointStore): Promise<WebhookEndpointRow[]> {
  const { webhookEndpoints } = store.tables;
  return store.db
    .select()
    .from(webhookEndpoints)
    .where(and(isNull(webhookEndpoints.disabledAt), store.scope))
    .orderBy(webhookEndpoints.createdAt, webhookEndpoints.id);
}

/** One enabled endpoint in the store's scope; 404 otherwise. */
export async function findWebhookEndpoint(store: EndpointStore, id: string): Promise<WebhookEndpointRow> {
  const { webhookEndpoints } = store.tables;
  const [row] = await store.db
    .select()
    .from(webhookEndpoints)
    .where(and(eq(webhookEndpoints.id, id), isNull(webhookEndpoints.disabledAt), store.scope));
  if (!row) throw notFound(`No webhook endpoint ${id}`);
  return row;
}

/**
 * Rotates an endpoint's signing secret (DESIGN §6.8): a new secret signs every delivery from now on,
 * and for `expiresInSeconds` (0: not at all) the one it replaces signs them too, so a receiver
 * verifying with either accepts them while it is redeployed with the new one. Each delivery then
 * carries both signatures, Stripe's several `v1` entries. Rotating again while a previous secret is
 * still active replaces that previous secret with the current one: at most two secrets sign at once,
 * the oldest is dropped at once, and a receiver still on it must take the secret of the rotation
 * before: an old secret never lives on unseen. A removed endpoint is not found (404), as for DELETE.
 */
export async function rotateWebhookEndpointSecret(store: EndpointStore, now: Date, id: string, expiresInSeconds: number): Promise<{ before: WebhookEndpointRow; after: WebhookEndpointRow }> {
  const { webhookEndpoints } = store.tables;
  const rotated = await store.db.transaction(async (tx) => {
    const [before] = await tx
      .select()
      .from(webhookEndpoints)
      .where(and(eq(webhookEndpoints.id, id), isNull(webhookEndpoints.disabledAt), store.scope))
      .for("update");
    if (!before) return null;
    const [after] = await tx
      .update(webhookEndpoints)
      .set({
        secret: newSecret(),
        previousSecret: expiresInSeconds > 0 ? before.secret : null,
        previousSecretExpiresAt: new Date(now.getTime() + expiresInSeconds * 1000),
      })
      .where(eq(webhookEndpoints.id, id))
      .returning();
    return { before, after: after! };
  });
  if (!rotated) throw notFound(`No webhook endpoint ${id}`);
  return rotated;
}

/**
 * Removes an endpoint (DESIGN §6.8): nothing more is sent to it, and its pending deliveries end as
 * failed, in one transaction; its history stays readable. Answers the endpoint as it was.
 */
export async function removeWebhookEndpoint(store: EndpointStore, now: Date, id: string): Promise<WebhookEndpointRow> {
  const { webhookEndpoints, webhookDeliveries } = store.tables;
  const removed = await store.db.transaction(async (tx) => {
    const [row] = await tx
      .update(webhookEndpoints)
      .set({ disabledAt: now })
      .where(and(eq(webhookEndpoints.id, id), isNull(webhookEndpoints.disabledAt), store.scope))
      .returning();
    if (!row) return null;
    await tx
      .update(webhookDeliveries)
      .set({ status: "failed", finishedAt: now, leaseUntil: null })
      .where(and(eq(webhookDeliveries.endpointId, id), eq(webhookDeliveries.status, "pending")));
    return row;
  });
  if (!removed) throw notFound(`No webhook endpoint ${id}`);
  return removed;
}

/** A page of an endpoint's deliveries (a removed one's too, in the store's scope), newest first, each with every attempt and how the endpoint answered. */
export async function listDeliveries(store: EndpointStore, endpointId: string, page: { limit: number; cursor?: string }) {
  const { db } = store;
  const { webhookEndpoints, webhookDeliveries, webhookEvents, webhookAttempts } = store.tables;
  const NEWEST_FIRST: KeysetColumns = { key: webhookDeliveries.createdAt, tie: webhookDeliveries.id, direction: "desc" };
  const [endpoint] = await db
    .select({ id: webhookEndpoints.id })
    .from(webhookEndpoints)
    .where(and(eq(webhookEndpoints.id, endpointId), store.scope));
  if (!endpoint) throw notFound(`No webhook endpoint ${endpointId}`);
  const rows = await db
    .select({ delivery: webhookDeliveries, eventType: webhookEvents.type })
    .from(webhookDeliveries)
    .innerJoin(webhookEvents, eq(webhookEvents.id, webhookDeliveries.eventId))
    .where(and(eq(webhookDeliveries.endpointId, endpointId), keysetAfter(NEWEST_FIRST, decodeCursor(page.cursor, { key: "timestamp", tie: "id" }))))
    .orderBy(...keysetOrder(NEWEST_FIRST))
    .limit(page.limit + 1);
  const { data, cursor } = toPage(rows, page.limit, (r) => ({ k: r.delivery.createdAt, id: r.delivery.id }));
  // one query for the attempts of the whole page, not one per delivery
  const ids = data.map((r) => r.delivery.id);
  const attempts = ids.length ? await db.select().from(webhookAttempts).where(inArray(webhookAttempts.deliveryId, ids)).orderBy(webhookAttempts.deliveryId, webhookAttempts.attempt) : [];
  return {
    data: data.map(({ delivery: d, eventType }) => ({
      id: d.id,
      eventId: d.eventId,
      eventType,
      status: d.status,
      attempts: attempts.filter((a) => a.deliveryId === d.id).map((a) => ({ attempt: a.attempt, at: unixSeconds(a.at), status: a.status, response: a.response, durationMs: a.durationMs })),
      nextAttemptAt: d.status === "pending" ? Math.max(unixSeconds(d.nextAttemptAt), 0) : null,
      createdAt: unixSeconds(d.createdAt),
      finishedAt: d.finishedAt ? unixSeconds(d.finishedAt) : null,
    })),
    cursor,
  };
}

/** Loopback and private addresses are refused at registration when named directly (DESIGN §6.8); names are checked at each delivery. */
function refusePrivate(store: EndpointStore, url: string, allowPrivate: boolean) {
  if (allowPrivate) return;
  const host = new URL(url).hostname.replace(/^\[|\]$/g, "").toLowerCase();
  if (host === "localhost" || host.endsWith(".localhost") || (isIP(host) && isPrivateAddress(host))) {
    throw new ApiError(400, "VALIDATION_ERROR", `The URL names a loopback or private address; ${store.service} only sends there with ${store.allowPrivateSetting}=1`, [
      { path: "url", message: "a loopback or private address", code: "custom" },
    ]);
  }
}
