import { createHmac } from "node:crypto";
import { and, isNotNull, lte } from "drizzle-orm";
import type { Db } from "@core/storage";
import type { WebhookEndpointRow, WebhookTables } from "./tables.js";

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
export async function forgetExpiredSecrets(db: Db, { webhookEndpoints }: WebhookTables, now: Date): Promise<void> {
  await db
    .update(webhookEndpoints)
    .set({ previousSecret: null })
    .where(and(isNotNull(webhookEndpoints.previousSecret), lte(webhookEndpoints.previousSecretExpiresAt, now)));
}
