import { listen, silentLogger, type RunningServer } from "@core/kit";
import { remoteResolvers, ServiceTokenClient } from "@core/service-auth";
import { applyMigrations, testDatabases, type DatabaseHandle } from "@core/storage";
import { createApp as createBillingApp } from "../../../../services/billing/src/app.js";
import { migrationsFolder as billingMigrations, SERVICE_ID as BILLING } from "../../../../services/billing/src/index.js";
import { TEST_SELLER } from "../../../../services/billing/test/support/billing.js";
import { Catalogue, DEFAULT_PLANS } from "../../../../services/billing/src/plans.js";
import { createApp as createRegistryApp } from "../../../../services/platform-registry/src/app.js";
import { migrationsFolder as registryMigrations } from "../../../../services/platform-registry/src/index.js";
import { createIam, freePort, operator, REGISTRY_SECRET } from "../../../../services/iam/test/support/harness.js";
import { recordingProxy } from "./live-stack-registry.js";

const BILLING_SECRET = "billing-secret-for-cli-tests-0123456789abcdef";

/**
 * IAM, the platform registry and billing listening on loopback, wired to each other over HTTP as in
 * `npm start`: org-setup creates the platform in the registry, billing checks every credential with
 * IAM (its service token, remote resolvers) and asks the registry whether a platform exists. All
 * follow the wall clock, because the CLI runs in real time; billing pays with its local provider.
 * `record()` puts a recording proxy in front of billing, so a test sees what the CLI sent.
 */
export async function startLiveBilling() {
  // PostgreSQL when TEST_DATABASE_URL names a server (as in CI), else PGlite
  const database: DatabaseHandle = await testDatabases().at(-1)!.open();
  const [iamPort, registryPort, billingPort] = [await freePort(), await freePort(), await freePort()];
  const iamUrl = `http://127.0.0.1:${iamPort}`;
  const registryUrl = `http://127.0.0.1:${registryPort}`;
  const billingUrl = `http://127.0.0.1:${billingPort}`;
  const iam = await createIam(database, {
    config: { iamUrl, registryUrl, trustedOrigins: [iamUrl], deviceIntervalSeconds: 1 },
    serviceCredentials: new Map([
      ["platform-registry", REGISTRY_SECRET],
      [BILLING, BILLING_SECRET],
    ]),
  });
  iam.clock.now = () => new Date();
  await applyMigrations(database.db, "platform-registry", registryMigrations);
  await applyMigrations(database.db, BILLING, billingMigrations);
  const registryTokens = new ServiceTokenClient(iamUrl, { serviceId: "platform-registry", secret: REGISTRY_SECRET });
  const registry = createRegistryApp({ db: database.db, logger: silentLogger(), credentials: remoteResolvers({ iamUrl, serviceId: "platform-registry", tokens: registryTokens }) });
  const billingTokens = new ServiceTokenClient(iamUrl, { serviceId: BILLING, secret: BILLING_SECRET });
  const billing = createBillingApp({
    db: database.db,
    logger: silentLogger(),
    config: { billingUrl, registryUrl, iamUrl, catalogue: new Catalogue(DEFAULT_PLANS), taxPercent: "0", taxRates: null, seller: TEST_SELLER, testClock: false, workerIntervalMs: 60_000, usageGraceSeconds: 3600, mail: { smtpUrl: undefined, from: "Core <billing@localhost>", outboxDir: "/nonexistent" }, stripe: null, webhookAllowPrivate: true },
    credentials: remoteResolvers({ iamUrl, serviceId: BILLING, tokens: billingTokens }),
    tokens: billingTokens,
  });
  const servers: RunningServer[] = [await listen(iam.app, iamPort, "127.0.0.1"), await listen(registry, registryPort, "127.0.0.1"), await listen(billing, billingPort, "127.0.0.1")];
  const proxies: Awaited<ReturnType<typeof recordingProxy>>[] = [];
  const ops = await operator(iam);

  /** One request to billing itself (not through the proxy), with a session token. */
  async function billingCall(method: string, path: string, token: string, body?: unknown) {
    const res = await fetch(`${billingUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : null };
  }

  return {
    iam,
    iamUrl,
    /** billing's own address */
    url: billingUrl,
    /** a recording proxy of its own in front of billing, for a test to see what the CLI sent (tests run concurrently) */
    record: async () => {
      const proxy = await recordingProxy(billingUrl);
      proxies.push(proxy);
      return { url: proxy.url, requests: proxy.requests };
    },
    billingCall,
    /** the platform's subscription, read by billing's own route as its owner would */
    subscriptionOf: async (platformId: string, token: string) => (await billingCall("GET", `/subscription?platformId=${platformId}`, token)).body,
    /** POST /operator/credits as an operator: the customer's balance grows, so the next amount due shrinks */
    credit: async (customerId: string, amount: number) => {
      const r = await billingCall("POST", "/operator/credits", ops.token, { customerId, amount, description: "A goodwill credit" });
      if (r.status !== 200 && r.status !== 201) throw new Error(`credit refused: ${r.status} ${JSON.stringify(r.body)}`);
    },
    operatorToken: ops.token,
    close: async () => {
      for (const proxy of proxies) await proxy.close();
      for (const server of servers) await server.close();
      await database.close();
    },
  };
}

export type LiveBilling = Awaited<ReturnType<typeof startLiveBilling>>;
