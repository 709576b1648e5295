// Billing as the benchmarks run it: test support's pieces (the real app, real remote resolvers against
// the fake IAM over HTTP, the real platform registry on the same database, a manual clock), each
// listening on loopback so the load comes over real HTTP.
import { randomBytes } from "node:crypto";
import { resolve } from "node:path";
import { listen, manualClock, silentLogger, type RunningServer } from "@core/kit";
import { remoteResolvers, ServiceTokenClient } from "@core/service-auth";
import { applyMigrations, type DatabaseHandle } from "@core/storage";
import { startFakeIam } from "../packages/service-auth/test/support/fake-iam.js";
import { createApp as createBilling } from "../services/billing/src/app.js";
import { SERVICE_ID } from "../services/billing/src/index.js";
import { START, testBillingConfig } from "../services/billing/test/support/billing.js";
import { createApp as createRegistry } from "../services/platform-registry/src/app.js";

// bundled into node_modules/.cache, so the migrations are found from the repository root (test
// support's startBilling finds them from its own file, which is why it is not used here)
const billingMigrations = resolve("services/billing/drizzle");
const registryMigrations = resolve("services/platform-registry/drizzle");

/** Billing, the registry and the fake IAM on `database`; billing time starts at START. */
export async function billingStack(database: DatabaseHandle) {
  await applyMigrations(database.db, SERVICE_ID, billingMigrations);
  await applyMigrations(database.db, "platform-registry", registryMigrations);
  const iam = await startFakeIam();
  iam.serviceSecrets.set(SERVICE_ID, "billing-secret");
  iam.serviceSecrets.set("platform-registry", "registry-secret");
  const registryTokens = new ServiceTokenClient(iam.url, { serviceId: "platform-registry", secret: "registry-secret" });
  const registry: RunningServer = await listen(
    createRegistry({ db: database.db, logger: silentLogger(), credentials: remoteResolvers({ iamUrl: iam.url, serviceId: "platform-registry", tokens: registryTokens }) }),
    0,
    "127.0.0.1",
  );
  const clock = manualClock(START);
  const tokens = new ServiceTokenClient(iam.url, { serviceId: SERVICE_ID, secret: "billing-secret" });
  const app = createBilling({
    db: database.db,
    logger: silentLogger(),
    config: testBillingConfig({ registryUrl: registry.url }),
    credentials: remoteResolvers({ iamUrl: iam.url, serviceId: SERVICE_ID, tokens }),
    tokens,
    clock,
    mailer: { send: async () => {} },
  });
  const billing: RunningServer = await listen(app, 0, "127.0.0.1");
  const registryToken = await iam.mintServiceToken({ sub: "iam", aud: "platform-registry" });

  /** A new platform the registry knows, on free, as org-setup makes one. */
  async function newPlatform(): Promise<{ platformId: string; slug: string }> {
    const slug = `bench-${randomBytes(5).toString("hex")}`;
    const made = await fetch(`${registry.url}/platforms`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${registryToken}` },
      body: JSON.stringify({ name: `Platform ${slug}`, slug, tier: "free" }),
    });
    if (made.status !== 201) throw new Error(`platform refused: ${made.status} ${await made.text()}`);
    return { platformId: ((await made.json()) as { id: string }).id, slug };
  }

  return {
    app,
    iam,
    clock,
    url: billing.url,
    newPlatform,
    close: async () => {
      await app.ctx.worker.stop();
      await billing.close();
      await registry.close();
      await iam.close();
    },
  };
}
