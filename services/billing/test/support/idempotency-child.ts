import { systemClock } from "@core/kit";
import { LocalProvider } from "../../src/provider/local.js";
import { serveBillingChild } from "./child.js";

/**
 * Billing in a process of its own for the crash test of idempotency leases (DESIGN §6.6,
 * docs/vault/cross-cutting/security.md): its provider never answers a charge, so a request that
 * charges is mid-charge, holding its idempotency key, when the test kills the process.
 */
await serveBillingChild({}, (db, config) => ({
  provider: new LocalProvider(db, systemClock, config.billingUrl, { beforeCharge: () => new Promise<void>(() => {}) }),
}));
