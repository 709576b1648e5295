import type { Logger } from "@core/kit";
import type { Db } from "@core/storage";
import type { BillingTime } from "./billing-time.js";
import type { BillingMetrics } from "./metrics.js";
import type { Seller } from "./db/schema.js";
import type { Catalogue } from "./plans.js";
import type { PaymentProvider } from "./provider/types.js";
import type { TaxRates } from "./tax.js";

/** What the billing engine's operations work with (DESIGN §6): its database, time, prices and provider. */
export interface Engine {
  db: Db;
  time: BillingTime;
  catalogue: Catalogue;
  provider: PaymentProvider;
  /** tax rates by the buyer's country (CORE_BILLING_TAX_RATES, CORE_BILLING_TAX_PERCENT the default) and the seller (DESIGN §6.11) */
  tax: { rates: TaxRates; seller: Seller };
  /** CORE_BILLING_USAGE_GRACE_SECONDS: a period's usage stays open this long after its end (DESIGN §6.5) */
  usageGraceSeconds: number;
  /**
   * How long a charge is waited for before its outcome is unknown (DESIGN §6.9): the provider's own
   * budget (Stripe's timeout × its tries) and a little more.
   */
  chargeDeadlineMs: number;
  /**
   * How long a lease billing takes (a subscription's change, a payment attempt in flight) holds
   * unrenewed (`LEASE_MS`, 15 s): renewed while its holder runs, it frees a dead holder's claim within this.
   */
  leaseMs: number;
  logger: Logger;
  /** billing's public address: the links in its mails (an invoice's PDF, the portal) live under it */
  billingUrl: string;
  /** what collection and the worker count (DESIGN §10) */
  metrics: BillingMetrics;
}
