// Benchmark of the system's hot path (issue 2 "Speed", issue 15): POST /api/validate-session on
// IAM, warm (one token, cached) and cold (a new token each request), the shared credential
// middleware of every resource service, and the platform registry's GET /platforms. Each is measured
// right after a raw node:http server answering a small JSON body, in the same run and with the same
// load generator, and reported as the median of its ratios to that baseline over several rounds (the
// machine is shared and noisy). Prints figures and targets, judged on Node 24 (ADR 0005); never
// passes or fails.
//
//   npm run bench                          (embedded PGlite)
//   BENCH_DATABASE_URL=postgres://… npm run bench
//   BENCH_SECONDS=4 BENCH_ROUNDS=3 BENCH_CONNECTIONS=50 npm run bench
//   BENCH_ONLY=warm|cold|middleware|registry npm run bench     (one case, for profiling)
import { fork } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { randomBytes } from "node:crypto";
import { createServer } from "node:http";
import { join, resolve } from "node:path";
import { sql } from "drizzle-orm";
import { createServiceApp, listen, silentLogger } from "@core/kit";
import { applyMigrations, openDatabase, type Db } from "@core/storage";
import { guardCaller, remoteResolvers, requireCaller, ServiceTokenClient } from "@core/service-auth";
import { createApp as createIam } from "../services/iam/src/app.js";
import { createApp as createRegistry } from "../services/platform-registry/src/app.js";
import { freePort, REGISTRY_SECRET, testConfig } from "../services/iam/test/support/harness.js";

const seconds = Number(process.env.BENCH_SECONDS ?? 4);
const rounds = Number(process.env.BENCH_ROUNDS ?? 3);
const connections = Number(process.env.BENCH_CONNECTIONS ?? 50);
const coldTokens = Number(process.env.BENCH_COLD_TOKENS ?? 50_000);
/** the major version of the recommended runtime (README), on which the targets are judged */
const JUDGED_ON_NODE = 24;

interface Run {
  url: string;
  method: "GET" | "POST";
  headers: Record<string, string>;
  body?: string;
  /** a file of request bodies, one a line, sent in turn (the cold run) */
  bodiesFile?: string;
}

/**
 * One autocannon run from a separate process (bench/load.mjs), so client and server do not share a
 * thread. Answers the rate, and the CPU time this process spent per request: for the servers in
 * this process (the raw baseline, IAM) a figure that depends far less than the rate on what the
 * load generator and the rest of the machine take from the two cores.
 */
function load(title: string, run: Run, servedHere: boolean): Promise<{ rate: number; cpuPerRequest: number }> {
  return new Promise((resolveRun, reject) => {
    const child = fork(resolve("bench/load.mjs"));
    child.once("error", reject);
    let cpu: NodeJS.CpuUsage;
    child.once("spawn", () => (cpu = process.cpuUsage()));
    child.once("message", (m: { rate: number; total: number; p50: number; p99: number; errors: number }) => {
      const used = process.cpuUsage(cpu);
      const cpuPerRequest = (used.user + used.system) / Math.max(1, m.total);
      const perRequest = servedHere ? `   ${cpuPerRequest.toFixed(1).padStart(5)} µs CPU/req` : "";
      console.log(
        `${title.padEnd(48)} ${m.rate.toFixed(0).padStart(7)} req/s   p50 ${String(m.p50).padStart(3)} ms   p99 ${String(m.p99).padStart(3)} ms${perRequest}${m.errors ? `   (${m.errors} errors/non-2xx)` : ""}`,
      );
      resolveRun({ rate: m.rate, cpuPerRequest });
    });
    child.send({ ...run, connections, seconds });
  });
}

// bundled into node_modules/.cache, so the migrations are found from the repository root
const iamMigrations = resolve("services/iam/drizzle");
const registryMigrations = resolve("services/platform-registry/drizzle");

/**
 * The resource side: the platform registry and a route that does nothing but the credential
 * middleware, both asking IAM at `iamUrl`. On PostgreSQL they run in a process of their own, as a
 * resource service runs in production (DESIGN §1): without the auth library in the process, Node
 * 20's AsyncLocalStorage tax (ADR 0005) is not theirs to pay. PGlite belongs to one process, so on
 * it they share IAM's.
 */
async function startResources(db: Db, iamUrl: string, registryPort: number) {
  const credentials = () =>
    remoteResolvers({ iamUrl, serviceId: "platform-registry", tokens: new ServiceTokenClient(iamUrl, { serviceId: "platform-registry", secret: REGISTRY_SECRET }) });
  const registry = createRegistry({ db, logger: silentLogger(), credentials: credentials() });
  const registryServer = await listen(registry, registryPort, "127.0.0.1");
  // the credential check as the registries make it: the kit's guard, then a route that reads the caller
  const resolvers = credentials();
  const guarded = createServiceApp({ service: "bench", title: "bench", logger: silentLogger(), guard: (c) => guardCaller(c, resolvers) });
  guarded.get("/whoami", async (c) => {
    const caller = await requireCaller(c, resolvers);
    return c.json({ userId: caller.kind === "principal" ? caller.principal.userId : null });
  });
  const guardedServer = await listen(guarded, 0, "127.0.0.1");
  return {
    guardedUrl: guardedServer.url,
    close: async () => {
      await guardedServer.close();
      await registryServer.close();
    },
  };
}

if (process.env.BENCH_ROLE === "resources") {
  const database = await openDatabase({ url: process.env.BENCH_DATABASE_URL });
  const resources = await startResources(database.db, process.env.BENCH_IAM_URL!, Number(process.env.BENCH_REGISTRY_PORT));
  process.send!({ guardedUrl: resources.guardedUrl });
  // the parent failed or was stopped: do not outlive it holding its terminal open
  process.once("disconnect", () => process.exit(1));
  process.once("message", async () => {
    await resources.close();
    await database.close();
    process.exit(0);
  });
  await new Promise(() => {});
}

const database = await openDatabase({ url: process.env.BENCH_DATABASE_URL });
await applyMigrations(database.db, "iam", iamMigrations);
await applyMigrations(database.db, "platform-registry", registryMigrations);

// a raw node:http server: read the body, answer a small JSON document
const raw = createServer((req, res) => {
  req.resume();
  req.on("end", () => {
    res.writeHead(200, { "content-type": "application/json" });
    res.end('{"valid":true}');
  });
});
await new Promise<void>((r) => raw.listen(0, "127.0.0.1", () => r()));
const rawUrl = `http://127.0.0.1:${(raw.address() as { port: number }).port}`;

const [iamPort, registryPort] = [await freePort(), await freePort()];
const iamUrl = `http://127.0.0.1:${iamPort}`;
const config = testConfig({ iamUrl, trustedOrigins: [iamUrl], registryUrl: `http://127.0.0.1:${registryPort}` });
const iam = createIam({ db: database.db, logger: silentLogger(), config, serviceCredentials: new Map([["platform-registry", REGISTRY_SECRET]]) });
const iamServer = await listen(iam, iamPort, "127.0.0.1");
const separate = database.kind === "postgres";
const resources = separate
  ? await new Promise<{ guardedUrl: string; close: () => Promise<void> }>((resolveStarted, reject) => {
      const child = fork(process.env.BENCH_BUNDLE!, { env: { ...process.env, BENCH_ROLE: "resources", BENCH_IAM_URL: iamUrl, BENCH_REGISTRY_PORT: String(registryPort) } });
      child.once("error", reject);
      child.once("exit", (code) => reject(new Error(`the resource process exited (${code})`)));
      child.once("message", (m: { guardedUrl: string }) =>
        resolveStarted({
          guardedUrl: m.guardedUrl,
          close: () =>
            new Promise<void>((done) => {
              child.removeAllListeners("exit");
              child.once("exit", () => done());
              child.send("stop");
            }),
        }),
      );
    })
  : await startResources(database.db, iamUrl, registryPort);

// one signed-up user, plus many extra sessions of theirs for the cold run
const signUp = await fetch(`${iamUrl}/api/auth/sign-up/email`, {
  method: "POST",
  headers: { "content-type": "application/json", origin: iamUrl },
  body: JSON.stringify({ email: "bench@example.com", password: "correct-horse-battery", name: "Bench" }),
});
if (signUp.status !== 200) throw new Error(`sign-up failed: ${signUp.status} ${await signUp.text()} (the benchmark wants an empty database)`);
const { token, user } = (await signUp.json()) as { token: string; user: { id: string } };
// an organization with a platform, so the registry route has something to answer
const setup = await fetch(`${iamUrl}/api/core/org-setup`, {
  method: "POST",
  headers: { "content-type": "application/json", origin: iamUrl, cookie: signUp.headers.get("set-cookie")!.split(";")[0]! },
  body: JSON.stringify({ name: "Bench", slug: "bench" }),
});
if (setup.status !== 201) throw new Error(`org-setup failed: ${setup.status} ${await setup.text()}`);
const tokens = Array.from({ length: coldTokens }, () => randomBytes(24).toString("base64url"));
for (let i = 0; i < tokens.length; i += 5_000) {
  const chunk = tokens.slice(i, i + 5_000);
  await database.db.execute(sql`
    insert into iam.session (id, token, user_id, expires_at, created_at, updated_at)
    select 'bench-' || t, t, ${user.id}, now() + interval '1 day', now(), now() from unnest(string_to_array(${chunk.join(",")}, ',')) as t`);
}
const basic = Buffer.from(`platform-registry:${REGISTRY_SECRET}`).toString("base64");
const tokenAnswer = await fetch(`${iamUrl}/api/core/service-token`, {
  method: "POST",
  headers: { "content-type": "application/json", authorization: `Basic ${basic}` },
  body: JSON.stringify({ serviceId: "platform-registry", targetService: "iam" }),
});
const serviceToken = ((await tokenAnswer.json()) as { token: string }).token;

console.log(
  `validate-session benchmark: ${seconds} s per run, ${rounds} rounds, ${connections} connections, database ${database.kind}, node ${process.version}, ` +
    (separate ? "resource services in their own process" : "every service in one process"),
);
const post = (body: string) => ({
  method: "POST" as const,
  headers: { "content-type": "application/json", authorization: `Bearer ${serviceToken}` },
  body,
});

const bodiesFile = join(mkdtempSync(join(tmpdir(), "core-bench-")), "bodies.txt");
writeFileSync(bodiesFile, tokens.map((t) => JSON.stringify({ token: t })).join("\n"));
const cases: { name: string; title: string; target: number; run: Run; servedHere: boolean }[] = [
  // 0.30 since the one HTTP path (ADR 0005, "One HTTP path"): the pre-Hono listener that gave 0.67-0.84 is gone
  { name: "warm", title: "POST /api/validate-session, warm (one token)", target: 0.3, run: { url: `${iamUrl}/api/validate-session`, ...post(JSON.stringify({ token })) }, servedHere: true },
  { name: "middleware", title: "credential middleware, route doing nothing", target: 0.65, run: { url: `${resources.guardedUrl}/whoami`, method: "GET", headers: { authorization: `Bearer ${token}` } }, servedHere: !separate },
  { name: "registry", title: `registry GET /platforms (${database.kind})`, target: 0.25, run: { url: `http://127.0.0.1:${registryPort}/platforms`, method: "GET", headers: { authorization: `Bearer ${token}` } }, servedHere: false },
  { name: "cold", title: `POST /api/validate-session, cold (${coldTokens} tokens)`, target: 0.25, run: { url: `${iamUrl}/api/validate-session`, ...post(""), bodiesFile }, servedHere: true },
];
const rawRun: Run = { url: `${rawUrl}/`, ...post(JSON.stringify({ token })) };
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const results: { title: string; target: number; rate: number; ratio: number; ratios: number[]; cpuRatio: number | null }[] = [];
for (const c of cases.filter((c) => !process.env.BENCH_ONLY || process.env.BENCH_ONLY === c.name)) {
  const rates: number[] = [];
  const ratios: number[] = [];
  const cpuRatios: number[] = [];
  for (let round = 0; round < rounds; round++) {
    // the baseline right before each measurement: what the machine gives at that moment
    const raw = await load("  raw node:http (same body, same client)", rawRun, true);
    const measured = await load(`  ${c.title}`, c.run, c.servedHere);
    rates.push(measured.rate);
    ratios.push(measured.rate / raw.rate);
    cpuRatios.push(raw.cpuPerRequest / measured.cpuPerRequest);
  }
  results.push({ title: c.title, target: c.target, rate: median(rates), ratio: median(ratios), ratios, cpuRatio: c.servedHere ? median(cpuRatios) : null });
}

console.log("");
console.log(`median of ${rounds} rounds, each a ratio to raw node:http measured just before it:`);
for (const r of results) {
  const verdict = r.ratio >= r.target ? "met" : "NOT met";
  const cpu = r.cpuRatio === null ? "" : `   (CPU per request: raw's is ${r.cpuRatio.toFixed(2)} × this)`;
  // the median with three places, so a ratio a hair under its target does not print as the target itself
  console.log(
    `${r.title.padEnd(46)} ${r.rate.toFixed(0).padStart(7)} req/s   ${r.ratio.toFixed(3)} × raw (rounds ${r.ratios.map((x) => x.toFixed(2)).join(" ")})   target ≥ ${r.target.toFixed(2)}: ${verdict}${cpu}`,
  );
}
// the targets hold on the runtime the README recommends; other runtimes are measured against the
// same targets for comparison (ADR 0005, "Which runtime the targets are judged on")
const major = Number(process.versions.node.split(".")[0]);
if (major < JUDGED_ON_NODE) console.log(`\nthe targets are judged on Node ${JUDGED_ON_NODE}, the recommended runtime (ADR 0005); this run on Node ${major} is for comparison`);

await resources.close();
await iamServer.close();
raw.close();
await database.close();
process.exit(0);
