import { ConfigError, mailConfig, positiveIntEnv, type CommonConfig, type MailConfig } from "@core/kit";
import type { Seller } from "./db/schema.js";
import { loadCatalogue, type Catalogue } from "./plans.js";
import { loadSeller, PERCENT, TaxRates } from "./tax.js";

export interface BillingConfig {
  /** this service's public address: the portal's pages and links live under it */
  billingUrl: string;
  /** where the platform registry is: tiers follow billing there (DESIGN §6.3) */
  registryUrl: string;
  catalogue: Catalogue;
  /** IAM's public address: its sign-in page and account page (browser redirects, the portal's way back) */
  iamUrl: string;
  /** CORE_BILLING_TAX_PERCENT: the default tax rate when CORE_BILLING_TAX_RATES names none (DESIGN §6.4) */
  taxPercent: string;
  /** CORE_BILLING_TAX_RATES: rates by the buyer's country and state, inline JSON or a file read again when it changes (DESIGN §6.11); null: the default only */
  taxRates: TaxRates | null;
  /** CORE_BILLING_SELLER: who invoices name as the seller (DESIGN §6.11) */
  seller: Seller;
  /** CORE_BILLING_TEST_CLOCK=1 adds the test-clock routes (never the default) */
  testClock: boolean;
  /** how often the worker of each replica looks for renewals, retries, trial ends and period closes */
  workerIntervalMs: number;
  /** CORE_BILLING_USAGE_GRACE_SECONDS: how long a period's usage stays open after its end (DESIGN §6.5) */
  usageGraceSeconds: number;
  /** where usage alerts are mailed from, and how (SMTP_URL or the outbox) */
  mail: MailConfig;
  /** STRIPE_SECRET_KEY chooses the stripe provider (DESIGN §6.1); null: the local one */
  stripe: StripeConfig | null;
  /** CORE_BILLING_WEBHOOK_ALLOW_PRIVATE: webhooks may go to loopback and private addresses (default: on the embedded database only) */
  webhookAllowPrivate: boolean;
}

export interface StripeConfig {
  secretKey: string;
  /** STRIPE_WEBHOOK_SECRET: what `POST /webhooks/stripe` checks signatures with */
  webhookSecret: string;
  /** CORE_STRIPE_API_URL: another address for Stripe's API (a proxy, or the tests' fake); default Stripe's */
  apiBase: string | undefined;
  /** per request before the SDK retries (tests shorten it); default 20 s */
  timeoutMs?: number;
  /** the SDK's retries of a request (tests lower it); default 2 */
  maxNetworkRetries?: number;
}

/** Billing's settings from the environment (README "Configuration"); fails fast with one line. */
export function loadBillingConfig(common: CommonConfig, env: NodeJS.ProcessEnv = process.env): BillingConfig {
  const taxPercent = env.CORE_BILLING_TAX_PERCENT || "0";
  if (!PERCENT.test(taxPercent)) throw new ConfigError(`CORE_BILLING_TAX_PERCENT must be a percentage from 0 to 100 (up to 4 decimals), got "${taxPercent}"`);
  const testClock = env.CORE_BILLING_TEST_CLOCK ?? "";
  if (!["", "0", "1"].includes(testClock)) throw new ConfigError(`CORE_BILLING_TEST_CLOCK must be 1 or unset, got "${testClock}"`);
  const mail = mailConfig(common, env);
  return {
    billingUrl: common.url("billing"),
    iamUrl: common.url("iam"),
    registryUrl: common.url("platform-registry"),
    catalogue: loadCatalogue(env.CORE_BILLING_PLANS || undefined),
    taxPercent,
    taxRates: env.CORE_BILLING_TAX_RATES?.trim() ? TaxRates.load(env.CORE_BILLING_TAX_RATES, taxPercent, Boolean(env.CORE_BILLING_TAX_PERCENT)) : null,
    seller: loadSeller(env.CORE_BILLING_SELLER || undefined, mail.from),
    testClock: testClock === "1",
    workerIntervalMs: positiveIntEnv(env, "CORE_BILLING_WORKER_INTERVAL_MS", 5_000),
    usageGraceSeconds: positiveIntEnv(env, "CORE_BILLING_USAGE_GRACE_SECONDS", 3600),
    mail,
    stripe: stripeConfig(env),
    webhookAllowPrivate: allowPrivate(common, env),
  };
}

/** Development on the embedded database reaches localhost receivers; with PostgreSQL (production) only when told. */
function allowPrivate(common: CommonConfig, env: NodeJS.ProcessEnv): boolean {
  const value = env.CORE_BILLING_WEBHOOK_ALLOW_PRIVATE ?? "";
  if (!["", "0", "1"].includes(value)) throw new ConfigError(`CORE_BILLING_WEBHOOK_ALLOW_PRIVATE must be 1, 0 or unset, got "${value.slice(0, 40)}"`);
  return value === "" ? !common.databaseUrl : value === "1";
}

/** Both Stripe secrets or neither: a provider that moves money but cannot hear back is refused at start. */
function stripeConfig(env: NodeJS.ProcessEnv): StripeConfig | null {
  const secretKey = env.STRIPE_SECRET_KEY?.trim() || "";
  const webhookSecret = env.STRIPE_WEBHOOK_SECRET?.trim() || "";
  if (!secretKey && !webhookSecret) return null;
  if (!/^(sk|rk)_(test|live)_[A-Za-z0-9]{8,}$/.test(secretKey)) {
    throw new ConfigError("STRIPE_SECRET_KEY must be a Stripe secret or restricted key (sk_test_…, sk_live_…, rk_…) when STRIPE_WEBHOOK_SECRET is set");
  }
  if (!/^whsec_[A-Za-z0-9+/=]{8,}$/.test(webhookSecret)) {
    throw new ConfigError("STRIPE_WEBHOOK_SECRET must be the endpoint's signing secret (whsec_…) when STRIPE_SECRET_KEY is set: without it Stripe's events cannot be trusted");
  }
  const apiBase = env.CORE_STRIPE_API_URL?.trim() || undefined;
  if (apiBase !== undefined && !/^https?:\/\/[^\s]+$/.test(apiBase)) throw new ConfigError(`CORE_STRIPE_API_URL must be an http(s) address, got "${apiBase.slice(0, 100)}"`);
  return { secretKey, webhookSecret, apiBase };
}
