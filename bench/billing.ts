// Benchmark of billing's two hot reads (issue "Performance"): GET /subscription and GET /invoices
// of one upgraded platform with about 50 invoices, among a few hundred other paying platforms, on a
// fresh PostgreSQL database (and on PGlite in memory), each against a raw node:http server
// answering a small JSON body in the same run. The machine is shared and noisy, so every rate is
// printed as a ratio of that baseline. Prints figures, never passes or fails.
//
//   node bench/run.mjs bench/billing.ts      (npm run bench:billing)
//   BENCH_DATABASE_URL=postgres://user@host/db   the server to create the throwaway database on
//   BENCH_SECONDS=10 BENCH_CONNECTIONS=10 BENCH_PLATFORMS=300 BENCH_PGLITE=0
//   (defaults: 8 s per run so the whole run stays near 2 minutes, 10 connections, 300 other
//   platforms, PGlite after PostgreSQL)
import { randomBytes, randomUUID } from "node:crypto";
import { cpus } from "node:os";
import { resolve } from "node:path";
import { sql } from "drizzle-orm";
import { listen, manualClock, silentLogger, type RunningServer } from "@core/kit";
import { POSITIVE_TTL_MS, remoteResolvers, ServiceTokenClient } from "@core/service-auth";
import { applyMigrations, openDatabase, rowsOf, type DatabaseHandle } from "@core/storage";
import { principal, startFakeIam } from "../packages/service-auth/test/support/fake-iam.js";
import { createApp as createBilling } from "../services/billing/src/app.js";
import { SERVICE_ID } from "../services/billing/src/index.js";
import { START, testBillingConfig } from "../services/billing/test/support/billing.js";
import { createApp as createRegistry } from "../services/platform-registry/src/app.js";
import { freshPostgres, inParallel, load as loadRun, rawServer, ratio, type Measurement } from "./support.js";

const seconds = Number(process.env.BENCH_SECONDS ?? 8);
const connections = Number(process.env.BENCH_CONNECTIONS ?? 10);
const otherPlatforms = Number(process.env.BENCH_PLATFORMS ?? 300);
const withPglite = process.env.BENCH_PGLITE !== "0";
/** renewals of the measured platform: with its upgrade invoice, 50 invoices */
const RENEWALS = 49;
const PAGE = 25;

// bundled into node_modules/.cache, so the migrations are found from the repository root (test
// support's startBilling finds them from its own file, which is why it is not used here)
const billingMigrations = resolve("services/billing/drizzle");
const registryMigrations = resolve("services/platform-registry/drizzle");

const load = (title: string, url: string, headers: Record<string, string> = {}): Promise<Measurement> => loadRun(title, { url, headers, connections, seconds });

/**
 * Billing as test support's startBilling builds it (real app, real remote resolvers against the fake
 * IAM over HTTP, the real platform registry on the same database, a manual clock), but listening on
 * loopback, and seeded: one platform upgraded at START and renewed month by month, and
 * `otherPlatforms` more that upgrade at the end.
 */
async function seededBilling(database: DatabaseHandle) {
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
  });
  const billing: RunningServer = await listen(app, 0, "127.0.0.1");

  const registryToken = await iam.mintServiceToken({ sub: "iam", aud: "platform-registry" });
  async function paidPlatform(): Promise<{ platformId: string; owner: Record<string, string> }> {
    const slug = `bench-${randomBytes(5).toString("hex")}`;
    const made = await fetch(`${registry.url}/platforms`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${registryToken}` },
      body: JSON.stringify({ name: `Platform ${slug}`, slug, tier: "free" }),
    });
    if (made.status !== 201) throw new Error(`platform refused: ${made.status} ${await made.text()}`);
    const platformId = ((await made.json()) as { id: string }).id;
    const token = `session-${randomBytes(12).toString("hex")}`;
    const permissions = ["platform:read", "platform:write", "billing:read", "billing:manage"];
    iam.sessions.set(token, principal({ orgType: "tenant", platformId, role: "owner", permissions, userId: `usr_${slug}`, email: `${slug}@example.com` }));
    const owner = { authorization: `Bearer ${token}` };
    const upgraded = await fetch(`${billing.url}/api/billing/upgrade`, {
      method: "POST",
      headers: { "content-type": "application/json", ...owner },
      body: JSON.stringify({ planId: "plan_starter", paymentMethodId: "pm_card_visa", billingEmail: "billing@example.com", idempotencyKey: randomUUID() }),
    });
    if (upgraded.status !== 200) throw new Error(`upgrade refused: ${upgraded.status} ${await upgraded.text()}`);
    return { platformId, owner };
  }

  const seedStart = performance.now();
  const measured = await paidPlatform();
  for (let month = 1; month <= RENEWALS; month++) {
    // a second past the period's end: START is on the 31st, so periods end on month ends
    clock.set(new Date(Date.UTC(START.getUTCFullYear(), START.getUTCMonth() + month + 1, 0, START.getUTCHours(), 0, 1)));
    await app.ctx.worker.pass();
  }
  // the others upgrade last, with one invoice each: renewing them too would double the seeding time
  await inParallel(otherPlatforms, 8, async () => void (await paidPlatform()));
  const seedSeconds = (performance.now() - seedStart) / 1000;

  const count = async (query: ReturnType<typeof sql>) => Number(rowsOf<{ n: string | number }>(await database.db.execute(query))[0]!.n);
  const facts = {
    seedSeconds,
    platforms: await count(sql`select count(*) as n from billing.subscriptions where current`),
    invoices: await count(sql`select count(*) as n from billing.invoices`),
    lines: await count(sql`select count(*) as n from billing.invoice_lines`),
    measuredInvoices: await count(sql`select count(*) as n from billing.invoices where platform_id = ${measured.platformId} and status <> 'draft'`),
  };
  return {
    ...measured,
    iam,
    billingUrl: billing.url,
    facts,
    close: async () => {
      await app.ctx.worker.stop();
      await billing.close();
      await registry.close();
      await iam.close();
    },
  };
}

/** Checks a route answers what the benchmark means to measure before timing it. */
async function expectAnswer(url: string, headers: Record<string, string>, check: (body: any) => boolean, what: string) {
  const res = await fetch(url, { headers });
  const body = await res.json();
  if (res.status !== 200 || !check(body)) throw new Error(`${url} should answer ${what}, answered ${res.status} ${JSON.stringify(body).slice(0, 300)}`);
}

/** Seeds billing on `database`, then times the raw baseline and the two routes one after the other. */
async function benchmark(database: DatabaseHandle, label: string) {
  const b = await seededBilling(database);
  try {
    const { facts } = b;
    console.log("");
    console.log(
      `${label}: ${facts.platforms} platforms, ${facts.invoices} invoices, ${facts.lines} invoice lines; the measured platform has ${facts.measuredInvoices} invoices; seeded in ${facts.seedSeconds.toFixed(1)} s`,
    );
    const subscriptionUrl = `${b.billingUrl}/subscription?platformId=${b.platformId}`;
    const invoicesUrl = `${b.billingUrl}/invoices?platformId=${b.platformId}&limit=${PAGE}`;
    await expectAnswer(subscriptionUrl, b.owner, (s) => s.tier === "starter", "the starter subscription");
    await expectAnswer(invoicesUrl, b.owner, (p) => p.data.length === PAGE && p.cursor !== null, `a full page of ${PAGE} invoices`);

    const asked = () => b.iam.calls["POST /api/validate-session"] ?? 0;
    const askedBefore = asked();
    const raw = await load("raw node:http (small JSON, same client)", `${rawUrl}/`);
    const subscription = await load("GET /subscription (owner, warm cache)", subscriptionUrl, b.owner);
    const invoices = await load(`GET /invoices?limit=${PAGE} (owner, warm cache)`, invoicesUrl, b.owner);
    console.log(`  IAM was asked to validate the session ${asked() - askedBefore} times in ${2 * seconds} s of billing load (warm cache: the resolver keeps an answer ${POSITIVE_TTL_MS / 1000} s)`);
    console.log(`  GET /subscription   ${ratio(subscription, raw)}   p99 ${subscription.p99} ms (raw ${raw.p99} ms)`);
    console.log(`  GET /invoices       ${ratio(invoices, raw)}   p99 ${invoices.p99} ms (raw ${raw.p99} ms)`);
  } finally {
    await b.close();
  }
}

const raw = await rawServer();
const rawUrl = raw.url;

const cpuList = cpus();
console.log(`billing benchmark: ${seconds} s per run, ${connections} connections, node ${process.version}, ${cpuList.length} cpus (${cpuList[0]?.model.trim() ?? "unknown"})`);
console.log("credentials: the owner's session token, resolved by billing's remote resolvers against a fake IAM over HTTP (loopback)");

const postgres = await freshPostgres();
try {
  const version = rowsOf<{ server_version: string }>(await postgres.db.execute(sql`show server_version`))[0]!.server_version;
  await benchmark(postgres, `PostgreSQL ${version}`);
} finally {
  await postgres.close();
}
if (withPglite) {
  const pglite = await openDatabase({});
  try {
    await benchmark(pglite, "PGlite (in memory, one connection)");
  } finally {
    await pglite.close();
  }
}

raw.close();
process.exit(0);
