import type { Db } from "@core/storage";
import type { BillingTime } from "./billing-time.js";
import type { Catalogue } from "./plans.js";
import type { PaymentProvider } from "./provider/types.js";

/** What the billing engine's operations work with (DESIGN §6): its database, time, prices and provider. */
export interface Engine {
  db: Db;
  time: BillingTime;
  catalogue: Catalogue;
  provider: PaymentProvider;
  /** CORE_BILLING_TAX_PERCENT, a decimal string */
  taxPercent: string;
  /** CORE_BILLING_USAGE_GRACE_SECONDS: a period's usage stays open this long after its end (DESIGN §6.5) */
  usageGraceSeconds: number;
}
