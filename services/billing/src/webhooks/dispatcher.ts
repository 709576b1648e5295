import type { Clock, Logger } from "@core/kit";
import type { Db } from "@core/storage";
import { WebhookDispatcher as SharedDispatcher, type DispatcherOptions } from "@core/webhooks";
import { webhookAttempts, webhookDeliveries, webhookEndpoints, webhookEvents } from "../db/schema.js";

// the scheme, the retries, the SSRF guard and the dispatcher are shared with IAM's audit stream (packages/webhooks, ADR 0027)
export {
  ATTEMPT_TIMEOUT_MS,
  FIRST_RETRY_MS,
  LONGEST_RETRY_MS,
  PrivateAddressRefused,
  RETRY_FOR_MS,
  isPrivateAddress,
  retryDelayMs,
  signPayload,
  signingSecrets,
  webhookAgent,
  type DispatcherOptions,
  type Resolver,
} from "@core/webhooks";

/** Billing's tables as the shared webhook code takes them. */
export const billingWebhookTables = { webhookEndpoints, webhookEvents, webhookDeliveries, webhookAttempts };

/** Private addresses are reached only with this setting (named in refusals and in failed attempts' answers). */
export const ALLOW_PRIVATE_SETTING = "CORE_BILLING_WEBHOOK_ALLOW_PRIVATE";

/**
 * Sends billing's pending deliveries (DESIGN §6.8): the shared dispatcher over billing's tables.
 * Every replica runs one in its worker.
 */
export class WebhookDispatcher extends SharedDispatcher {
  constructor(db: Db, clock: Clock, logger: Logger, options: DispatcherOptions) {
    super(db, billingWebhookTables, { service: "billing", allowPrivateSetting: ALLOW_PRIVATE_SETTING }, clock, logger, options);
  }
}
