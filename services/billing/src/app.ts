import { ServiceMetrics, createMailer, createServiceApp, silentLogger, systemClock, type Clock, type HealthCheck, type Logger, type Mailer } from "@core/kit";
import type { CredentialResolvers, ServiceTokenSource } from "@core/service-auth";
import type { Db } from "@core/storage";
import { PlatformDirectory } from "./access.js";
import { BillingTime } from "./billing-time.js";
import type { BillingConfig } from "./config.js";
import type { Engine } from "./engine.js";
import { askNowAboutPayments } from "./collection.js";
import { askNowAboutRefunds } from "./credit-notes.js";
import { IdempotencyKeys } from "./idempotency.js";
import { LEASE_MS } from "./leases.js";
import { MailOutbox } from "./mail/outbox.js";
import { BillingMetrics } from "./metrics.js";
import { pruneUsageEvents } from "./metering/retention.js";
import { LocalProvider } from "./provider/local.js";
import { STRIPE_NETWORK_RETRIES, STRIPE_TIMEOUT_MS, StripeProvider, stripeClient } from "./provider/stripe.js";
import type { PaymentProvider } from "./provider/types.js";
import { BillingWorker } from "./renewals.js";
import { customerRoutes } from "./routes/customers.js";
import { invoiceRoutes } from "./routes/invoices.js";
import { operatorRoutes } from "./routes/operator.js";
import { testClockRoutes } from "./routes/test-clock.js";
import { paymentMethodRoutes, platformPaymentMethodRoutes } from "./routes/payment-methods.js";
import { planRoutes } from "./routes/plans.js";
import { portalRoutes } from "./routes/portal.js";
import { portalDetailsRoutes } from "./routes/portal-details.js";
import { stripeWebhookRoutes } from "./routes/stripe-webhooks.js";
import { platformSubscriptionRoutes } from "./routes/subscription.js";
import { subscriptionRoutes } from "./routes/subscriptions.js";
import { usageEventRoutes } from "./routes/usage-events.js";
import { usageRoutes } from "./routes/usage.js";
import { webhookEndpointRoutes } from "./routes/webhook-endpoints.js";
import { WebhookDispatcher } from "./webhooks/dispatcher.js";
import { noteTrialsEnding } from "./webhooks/trials.js";
import { TierSync } from "./tier-sync.js";
import { TaxRates } from "./tax.js";

export interface BillingDeps {
  db: Db;
  logger: Logger;
  config: BillingConfig;
  credentials: CredentialResolvers;
  /** service tokens for billing's own calls (the platform registry) */
  tokens: ServiceTokenSource;
  clock?: Clock;
  provider?: PaymentProvider;
  /** fetch for calls to the platform registry (tests point it elsewhere) */
  fetch?: typeof fetch;
  healthChecks?: HealthCheck[];
  /** what `/health/ready` checks: the database and its migrations, IAM's keys */
  readinessChecks?: HealthCheck[];
  /** the service's metrics (the launcher's has the process and pool metrics); billing adds its own */
  metrics?: ServiceMetrics;
  /** where billing's mail goes (tests catch it); default SMTP_URL or the outbox folder */
  mailer?: Mailer;
  /** how long a charge is waited for (tests shorten it); default the provider's own budget */
  chargeDeadlineMs?: number;
  /** how long billing's leases (idempotency keys, subscription changes, payments in flight) hold unrenewed; default `LEASE_MS` (15 s) */
  leaseMs?: number;
}

/** Everything billing's route modules share. */
export interface BillingContext {
  engine: Engine;
  config: BillingConfig;
  logger: Logger;
  credentials: CredentialResolvers;
  platforms: PlatformDirectory;
  idempotency: IdempotencyKeys;
  worker: BillingWorker;
  tierSync: TierSync;
  /** billing's mail outbox (receipts, payment failures, trials ending, usage alerts); the worker drains it each pass */
  mail: MailOutbox;
  /** sends the outbox's deliveries; the worker runs it each pass */
  webhooks: WebhookDispatcher;
}

/** Billing's HTTP app (spec §4.4, DESIGN §6) and its worker, which the caller starts. */
export function createApp(deps: BillingDeps) {
  const clock = deps.clock ?? systemClock;
  const time = new BillingTime(deps.db, clock, deps.config.testClock);
  const metrics = new BillingMetrics(deps.metrics ?? new ServiceMetrics("billing"), deps.db, time, clock, deps.config.usageGraceSeconds);
  const stripe = deps.config.stripe
    ? { client: stripeClient({ ...deps.config.stripe }), webhookSecret: deps.config.stripe.webhookSecret }
    : null;
  // Stripe's budget: every try of the SDK times out, then a little more; the local provider answers from its own database
  const chargeDeadlineMs =
    deps.chargeDeadlineMs ??
    (deps.config.stripe ? (deps.config.stripe.timeoutMs ?? STRIPE_TIMEOUT_MS) * ((deps.config.stripe.maxNetworkRetries ?? STRIPE_NETWORK_RETRIES) + 1) + 5_000 : 30_000);
  const engine: Engine = {
    db: deps.db,
    time,
    catalogue: deps.config.catalogue,
    provider: deps.provider ?? (stripe ? new StripeProvider(deps.db, stripe.client) : new LocalProvider(deps.db, clock, deps.config.billingUrl)),
    tax: { rates: deps.config.taxRates ?? TaxRates.flat(deps.config.taxPercent), seller: deps.config.seller },
    usageGraceSeconds: deps.config.usageGraceSeconds,
    chargeDeadlineMs,
    leaseMs: deps.leaseMs ?? LEASE_MS,
    logger: deps.logger,
    billingUrl: deps.config.billingUrl,
    metrics,
  };
  engine.tax.rates.onReloadError = (message) => deps.logger.error({ setting: "CORE_BILLING_TAX_RATES" }, message);
  // a retry that takes over from a request whose process died asks about what it left in flight at once
  const idempotency = new IdempotencyKeys(deps.db, clock, { leaseMs: engine.leaseMs, onHolderGone: async (requestKey) => {
      await askNowAboutPayments(engine, requestKey);
      await askNowAboutRefunds(engine, requestKey);
    },
  });
  const tierSync = new TierSync(deps.db, deps.config.registryUrl, deps.tokens, deps.logger, deps.fetch);
  // the mail outbox logs each mail by id and kind; the kit's mailer would log its address too
  const mailer = deps.mailer ?? createMailer({ ...deps.config.mail, logger: silentLogger() });
  const webhooks = new WebhookDispatcher(deps.db, clock, deps.logger, { allowPrivate: deps.config.webhookAllowPrivate, givenUp: () => metrics.webhookGivenUp() });
  const mail = new MailOutbox(deps.db, mailer, deps.logger, () => clock.now());
  // side work of each pass, each on its own: one failing does not hold back the others
  const sideWork: [string, () => Promise<unknown>][] = [
    ["tier sync", () => tierSync.push(clock.now())],
    ["idempotency pruning", () => idempotency.prune()],
    ["usage retention", async () => pruneUsageEvents(deps.db, await time.now())],
    ["trials ending", async () => noteTrialsEnding(engine, await time.now())],
    ["mail outbox", () => mail.drain()],
    ["webhook deliveries", () => webhooks.pass()],
  ];
  // each side work is a job of its own in core_worker_pass_duration_seconds (tier_sync, webhook_deliveries …)
  const jobOf = (name: string) => name.replaceAll(" ", "_");
  metrics.service.workerJobs("renewals", ...sideWork.map(([name]) => jobOf(name)));
  const worker = new BillingWorker(engine, deps.config.workerIntervalMs, deps.logger, async () => {
    for (const [name, work] of sideWork) {
      await metrics.service.timePass(jobOf(name), work).catch((err: unknown) => deps.logger.error({ err: (err as Error).message, work: name }, "billing side work failed; tried again next pass"));
    }
  });
  const ctx: BillingContext = {
    engine,
    config: deps.config,
    logger: deps.logger,
    credentials: deps.credentials,
    platforms: new PlatformDirectory(deps.config.registryUrl, deps.tokens, deps.fetch),
    idempotency,
    worker,
    tierSync,
    mail,
    webhooks,
  };

  const app = createServiceApp({
    service: "billing",
    title: "Core billing",
    description:
      "Plans, subscriptions, tier changes with proration, invoices, credits, renewals, payment methods and usage metering (spec §4.4, DESIGN §6). " +
      "Table A answers under /api/billing and without the prefix alike.",
    logger: deps.logger,
    healthChecks: deps.healthChecks ?? [],
    readinessChecks: deps.readinessChecks ?? [],
    metrics: metrics.service,
    // spec §2.3: the upgrade route's errors carry no details
    omitsErrorDetails: (path) => path === "/api/billing/upgrade",
    // the portal's pages take form posts (DESIGN §6.1)
    ownsBody: (path) => path.startsWith("/portal/"),
    // a portal session's id is the bearer of its pages (docs/vault/cross-cutting/security.md#Logs)
    secretPathParameters: { "/portal/:id": ["id"] },
  });
  planRoutes(app, ctx);
  platformSubscriptionRoutes(app, ctx);
  invoiceRoutes(app, ctx);
  platformPaymentMethodRoutes(app, ctx);
  operatorRoutes(app, ctx);
  customerRoutes(app, ctx);
  paymentMethodRoutes(app, ctx);
  subscriptionRoutes(app, ctx);
  usageRoutes(app, ctx);
  usageEventRoutes(app, ctx);
  // before the portal's own /portal/:id pages: /portal/open is not a session id
  portalDetailsRoutes(app, ctx);
  portalRoutes(app, ctx);
  stripeWebhookRoutes(app, ctx, stripe, () => clock.now());
  webhookEndpointRoutes(app, ctx);
  if (deps.config.testClock) testClockRoutes(app, ctx);
  return Object.assign(app, { ctx });
}

export type BillingApp = ReturnType<typeof createApp>;
