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
import { sql } from "drizzle-orm";
import { POSITIVE_TTL_MS } from "@core/service-auth";
import { openDatabase, rowsOf, type DatabaseHandle } from "@core/storage";
import { principal } from "../packages/service-auth/test/support/fake-iam.js";
import { START } from "../services/billing/test/support/billing.js";
import { billingStack } from "./billing-stack.js";
import { freshPostgres, inParallel, load as loadRun, rawServer, ratio, type Measurement } from "./support.js";

const seconds = Number(process.env.BENCH_SECONDS ?? 8);
const connections = Number(process.env.BENCH_CONNECTIONS ?? 10);
const otherPlatforms = Number(process.env.BENCH_PLATFORMS ?? 300);
const withPglite = process.env.BENCH_PGLITE !== "0";
/** renewals of the measured platform: with its upgrade invoice, 50 invoices */
const RENEWALS = 49;
const PAGE = 25;


const load = (title: string, url: string, headers: Record<string, string> = {}): Promise<Measurement> => loadRun(title, { url, headers, connections, seconds });

/**
 * Billing on loopback (./billing-stack.ts), seeded: one platform upgraded at START and renewed month
 * by month, and `otherPlatforms` more that upgrade at the end.
 */
async function seededBilling(database: DatabaseHandle) {
  const stack = await billingStack(database);
  const { app, iam, clock } = stack;
  const billing = { url: stack.url };

  async function paidPlatform(): Promise<{ platformId: string; owner: Record<string, string> }> {
    const { platformId, slug } = await stack.newPlatform();
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
    close: stack.close,
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
