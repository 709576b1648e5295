import type { Db } from "@core/storage";
import * as shared from "@core/webhooks";
import type { WebhookEndpointRow } from "../db/schema.js";
import { ALLOW_PRIVATE_SETTING, billingWebhookTables } from "./dispatcher.js";
import type { EventType } from "./outbox.js";

// endpoints, rotation and delivery history are shared with IAM's audit stream (packages/webhooks, ADR 0027)
export { MAX_ENDPOINTS, MAX_ROTATION_GRACE_SECONDS, ROTATION_GRACE_SECONDS } from "@core/webhooks";

export interface NewEndpoint {
  url: string;
  /** the event types it takes; absent: all of them */
  events?: EventType[];
  description?: string;
}

const store = (db: Db): shared.EndpointStore => ({ db, tables: billingWebhookTables, service: "billing", allowPrivateSetting: ALLOW_PRIVATE_SETTING });

/** An endpoint in its answer's shape: never its secret (nor the previous one), which only the answer that made it shows. */
export function endpointJson(row: WebhookEndpointRow) {
  return { ...shared.endpointJson(row), events: (row.events as EventType[] | null) ?? null };
}

/** Rotates an endpoint's signing secret (DESIGN §6.8; rotateWebhookEndpointSecret in packages/webhooks). */
export function rotateWebhookEndpointSecret(db: Db, now: Date, id: string, expiresInSeconds: number) {
  return shared.rotateWebhookEndpointSecret(store(db), now, id, expiresInSeconds);
}

/** Registers an endpoint for billing's events (DESIGN §6.8), with a new signing secret. */
export function registerWebhookEndpoint(db: Db, now: Date, input: NewEndpoint, allowPrivate: boolean) {
  return shared.registerWebhookEndpoint(store(db), now, input, allowPrivate);
}

/** The endpoints registered now, oldest first. */
export function enabledWebhookEndpoints(db: Db) {
  return shared.enabledWebhookEndpoints(store(db));
}

/** Removes an endpoint (DESIGN §6.8): nothing more is sent to it; its history stays readable. */
export function removeWebhookEndpoint(db: Db, now: Date, id: string) {
  return shared.removeWebhookEndpoint(store(db), now, id);
}

/** A page of an endpoint's deliveries, newest first, each with every attempt. */
export async function listDeliveries(db: Db, endpointId: string, page: { limit: number; cursor?: string }) {
  const answer = await shared.listDeliveries(store(db), endpointId, page);
  return { ...answer, data: answer.data.map((d) => ({ ...d, eventType: d.eventType as EventType })) };
}
