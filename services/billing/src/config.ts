import { ConfigError, mailConfig, positiveIntEnv, type CommonConfig, type MailConfig } from "@core/kit";
import { loadCatalogue, type Catalogue } from "./plans.js";

export interface BillingConfig {
  /** this service's public address: the portal's pages and links live under it */
  billingUrl: string;
  /** where the platform registry is: tiers follow billing there (DESIGN §6.3) */
  registryUrl: string;
  catalogue: Catalogue;
  /** CORE_BILLING_TAX_PERCENT: one tax amount per invoice, on the subtotal, rounded once (DESIGN §6.4) */
  taxPercent: string;
  /** CORE_BILLING_TEST_CLOCK=1 adds the test-clock routes (never the default) */
  testClock: boolean;
  /** how often the worker of each replica looks for renewals, retries, trial ends and period closes */
  workerIntervalMs: number;
  /** CORE_BILLING_USAGE_GRACE_SECONDS: how long a period's usage stays open after its end (DESIGN §6.5) */
  usageGraceSeconds: number;
  /** where usage alerts are mailed from, and how (SMTP_URL or the outbox) */
  mail: MailConfig;
}

const PERCENT = /^(100(\.0{1,4})?|[1-9]?[0-9](\.[0-9]{1,4})?)$/;

/** Billing's settings from the environment (README "Configuration"); fails fast with one line. */
export function loadBillingConfig(common: CommonConfig, env: NodeJS.ProcessEnv = process.env): BillingConfig {
  const taxPercent = env.CORE_BILLING_TAX_PERCENT || "0";
  if (!PERCENT.test(taxPercent)) throw new ConfigError(`CORE_BILLING_TAX_PERCENT must be a percentage from 0 to 100 (up to 4 decimals), got "${taxPercent}"`);
  const testClock = env.CORE_BILLING_TEST_CLOCK ?? "";
  if (!["", "0", "1"].includes(testClock)) throw new ConfigError(`CORE_BILLING_TEST_CLOCK must be 1 or unset, got "${testClock}"`);
  return {
    billingUrl: common.url("billing"),
    registryUrl: common.url("platform-registry"),
    catalogue: loadCatalogue(env.CORE_BILLING_PLANS || undefined),
    taxPercent,
    testClock: testClock === "1",
    workerIntervalMs: positiveIntEnv(env, "CORE_BILLING_WORKER_INTERVAL_MS", 5_000),
    usageGraceSeconds: positiveIntEnv(env, "CORE_BILLING_USAGE_GRACE_SECONDS", 3600),
    mail: mailConfig(common, env),
  };
}
