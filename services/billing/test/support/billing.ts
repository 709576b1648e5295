import { randomBytes } from "node:crypto";
import { listen, manualClock, silentLogger, type Mail, type RunningServer } from "@core/kit";
import { remoteResolvers, ServiceTokenClient, type Principal } from "@core/service-auth";
import { applyMigrations, type DatabaseHandle, type TestDatabase } from "@core/storage";
import { createApp as createRegistryApp } from "../../../platform-registry/src/app.js";
import { migrationsFolder as registryMigrations } from "../../../platform-registry/src/index.js";
import { principal, startFakeIam, type FakeIam } from "../../../../packages/service-auth/test/support/fake-iam.js";
import { createApp, type BillingApp } from "../../src/app.js";
import type { BillingConfig } from "../../src/config.js";
import type { Seller } from "../../src/db/schema.js";
import { migrationsFolder, SERVICE_ID } from "../../src/index.js";
import { DEFAULT_PLANS, Catalogue } from "../../src/plans.js";
import { LocalProvider, type LocalProviderFaults } from "../../src/provider/local.js";

export type Headers = Record<string, string>;

export interface Answer<T = any> {
  status: number;
  body: T;
  headers: globalThis.Headers;
}

export const unique = (prefix = "t") => `${prefix}-${randomBytes(5).toString("hex")}`;

/** 2026-01-31T10:00:00Z: an anchor on the 31st, so periods end on month ends (29 February, 31 March, 30 April). */
export const START = new Date("2026-01-31T10:00:00.000Z");

/** The seller of the tests' invoices: a German company (reverse charge applies to other EU countries' businesses). */
export const TEST_SELLER: Seller = {
  name: "Core Cloud GmbH",
  addressLines: ["Friedrichstraße 1", "10117 Berlin"],
  country: "DE",
  taxId: "DE123456789",
  email: "billing@core.example",
  website: null,
};

export function testBillingConfig(overrides: Partial<BillingConfig> = {}): BillingConfig {
  return {
    billingUrl: "http://localhost:4200",
    iamUrl: "http://localhost:4100",
    taxRates: null,
    seller: TEST_SELLER,
    registryUrl: "http://127.0.0.1:1",
    catalogue: new Catalogue(DEFAULT_PLANS),
    taxPercent: "0",
    testClock: false,
    workerIntervalMs: 60_000,
    usageGraceSeconds: 3600,
    mail: { smtpUrl: undefined, from: "Core <billing@localhost>", outboxDir: "/nonexistent" },
    stripe: null,
    webhookAllowPrivate: true,
    ...overrides,
  };
}

/**
 * Billing as it runs: the real app on a real database with its migrations, credentials resolved by
 * the real remote resolvers against a fake IAM over HTTP, and the real platform registry (on the same
 * database, listening on loopback) for platforms and tiers. Time is a manual clock.
 */
export async function startBilling(database: TestDatabase, overrides: Partial<BillingConfig> = {}, extra: { localFaults?: LocalProviderFaults; chargeDeadlineMs?: number; leaseMs?: number; realMailer?: boolean } = {}) {
  const handle: DatabaseHandle = await database.open();
  await applyMigrations(handle.db, SERVICE_ID, migrationsFolder);
  await applyMigrations(handle.db, "platform-registry", registryMigrations);
  const iam: FakeIam = await startFakeIam();
  iam.serviceSecrets.set(SERVICE_ID, "billing-secret");
  iam.serviceSecrets.set("platform-registry", "registry-secret");
  const clock = manualClock(START);
  const registryCredentials = remoteResolvers({ iamUrl: iam.url, serviceId: "platform-registry", tokens: new ServiceTokenClient(iam.url, { serviceId: "platform-registry", secret: "registry-secret" }) });
  const registry: RunningServer = await listen(createRegistryApp({ db: handle.db, logger: silentLogger(), credentials: registryCredentials }), 0, "127.0.0.1");
  const tokens = new ServiceTokenClient(iam.url, { serviceId: SERVICE_ID, secret: "billing-secret" });
  const config = testBillingConfig({ registryUrl: registry.url, iamUrl: iam.url, ...overrides });
  /** what billing mailed (unless `realMailer`: then the kit's mailer of `config.mail`); `mailFails` makes the next sends throw, as a refusing SMTP server would */
  const mails: Mail[] = [];
  const mailer = {
    mailFails: false,
    async send(mail: Mail) {
      if (mailer.mailFails) throw Object.assign(new Error(`550 refused for ${mail.to}`), { code: "EENVELOPE" });
      mails.push(mail);
    },
  };
  const makeApp = (): BillingApp =>
    createApp({
      db: handle.db,
      logger: silentLogger(),
      config,
      credentials: remoteResolvers({ iamUrl: iam.url, serviceId: SERVICE_ID, tokens }),
      tokens,
      clock,
      mailer: extra.realMailer ? undefined : mailer,
      chargeDeadlineMs: extra.chargeDeadlineMs,
      leaseMs: extra.leaseMs,
      provider: extra.localFaults ? new LocalProvider(handle.db, clock, config.billingUrl, extra.localFaults) : undefined,
    });
  const app = makeApp();
  /** another replica of billing on the same database: its own engine, worker and provider client */
  const replicas: BillingApp[] = [];
  const replica = () => {
    const other = makeApp();
    replicas.push(other);
    return { app: other, call: (method: string, path: string, options: { headers?: Headers; body?: unknown } = {}) => callOn(other, method, path, options) };
  };

  const sessionOf = (who: Principal): Headers => {
    const token = unique("session");
    iam.sessions.set(token, who);
    return { authorization: `Bearer ${token}` };
  };

  const as = {
    /** the owner of a tenant organization with the platform: billing:read and billing:manage */
    owner: (platformId: string, permissions = ["platform:read", "platform:write", "billing:read", "billing:manage"]): Headers =>
      sessionOf(principal({ orgType: "tenant", platformId, role: "owner", permissions, email: `${unique("owner")}@example.com` })),
    /** a plain member of the platform's organization: billing:read only */
    member: (platformId: string): Headers => sessionOf(principal({ orgType: "tenant", platformId, role: "member", permissions: ["platform:read", "billing:read"] })),
    /** an operator: billing:operate, and billing:read/manage everywhere */
    operator: (): Headers =>
      sessionOf(principal({ orgType: "core-operator", orgId: "org_core", platformId: null, role: "owner", permissions: ["billing:read", "billing:manage", "billing:operate", "platforms:manage"] })),
    service: async (serviceId = "platform-registry"): Promise<Headers> => ({ authorization: `Bearer ${await iam.mintServiceToken({ sub: serviceId, aud: SERVICE_ID })}` }),
  };

  const call = <T = any>(method: string, path: string, options: { headers?: Headers; body?: unknown } = {}): Promise<Answer<T>> => callOn(app, method, path, options);

  /** billing (or a replica) listening on loopback: requests go over real HTTP, as a client's do */
  const servers: RunningServer[] = [];
  async function overHttp(target: BillingApp = app) {
    const server = await listen(target, 0, "127.0.0.1");
    servers.push(server);
    return {
      url: server.url,
      call: async <T = any>(method: string, path: string, options: { headers?: Headers; body?: unknown } = {}): Promise<Answer<T>> => {
        const headers: Headers = { ...options.headers };
        if (options.body !== undefined) headers["content-type"] ??= "application/json";
        const res = await fetch(`${server.url}${path}`, { method, headers, body: options.body === undefined ? undefined : typeof options.body === "string" ? options.body : JSON.stringify(options.body) });
        return answerOf<T>(res);
      },
    };
  }

  async function callOn<T = any>(target: BillingApp, method: string, path: string, options: { headers?: Headers; body?: unknown } = {}): Promise<Answer<T>> {
    const headers: Headers = { ...options.headers };
    if (options.body !== undefined) headers["content-type"] ??= "application/json";
    const res = await target.request(path, { method, headers, body: options.body === undefined ? undefined : typeof options.body === "string" ? options.body : JSON.stringify(options.body) });
    return answerOf<T>(res);
  }

  async function answerOf<T = any>(res: Response): Promise<Answer<T>> {
    const text = await res.text();
    let body: any = null;
    try {
      body = text ? JSON.parse(text) : null;
    } catch {
      body = text;
    }
    return { status: res.status, body, headers: res.headers };
  }

  /** A platform the registry knows, as org-setup makes one. */
  async function newPlatform(): Promise<string> {
    const slug = unique("p");
    const res = await fetch(`${registry.url}/platforms`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${await iam.mintServiceToken({ sub: "iam", aud: "platform-registry" })}` },
      body: JSON.stringify({ name: `Platform ${slug}`, slug, tier: "free" }),
    });
    if (res.status !== 201) throw new Error(`platform refused: ${res.status} ${await res.text()}`);
    return ((await res.json()) as { id: string }).id;
  }

  /** The registry's record of a platform (its tier follows billing). */
  async function platformOf(platformId: string): Promise<{ tier: string; status: string }> {
    const res = await fetch(`${registry.url}/platforms/${platformId}`, {
      headers: { authorization: `Bearer ${await iam.mintServiceToken({ sub: "iam", aud: "platform-registry" })}` },
    });
    return (await res.json()) as { tier: string; status: string };
  }

  /** A platform upgraded to `planId` with `card`, by its owner; answers the owner's headers too. */
  async function upgraded(planId = "plan_starter", card = "pm_card_visa") {
    const platformId = await newPlatform();
    const owner = as.owner(platformId);
    const r = await call("POST", "/api/billing/upgrade", { headers: owner, body: { planId, paymentMethodId: card, billingEmail: "billing@example.com", idempotencyKey: crypto.randomUUID() } });
    if (r.status !== 200) throw new Error(`upgrade refused: ${r.status} ${JSON.stringify(r.body)}`);
    return { platformId, owner, subscription: r.body.subscription, invoice: r.body.invoice };
  }

  return {
    app,
    ctx: app.ctx,
    engine: app.ctx.engine,
    iam,
    clock,
    db: handle.db,
    /** the database's address when it is a PostgreSQL server (a child process can open it too) */
    databaseUrl: (handle as { url?: string }).url,
    registryUrl: registry.url,
    as,
    call,
    replica,
    overHttp,
    newPlatform,
    platformOf,
    upgraded,
    mails,
    mailer,
    close: async () => {
      for (const server of servers) await server.close();
      for (const other of replicas) await other.ctx.worker.stop();
      await app.ctx.worker.stop();
      await registry.close();
      await iam.close();
      await handle.close();
    },
  };
}

export type Billing = Awaited<ReturnType<typeof startBilling>>;
