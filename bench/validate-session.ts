// Benchmark of the system's hot path (issue 2 "Speed"): POST /api/validate-session on IAM, and a
// resource route behind the shared credential middleware (the platform registry), each against a
// raw node:http server answering a small JSON body in the same run. Prints figures, never
// passes or fails. Target: warm validate-session ≥ 0.5 × raw node:http.
//
//   npm run bench                          (embedded PGlite)
//   BENCH_DATABASE_URL=postgres://… npm run bench
//   BENCH_SECONDS=10 BENCH_CONNECTIONS=50 npm run bench
import { fork } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { randomBytes } from "node:crypto";
import { createServer } from "node:http";
import { join, resolve } from "node:path";
import { sql } from "drizzle-orm";
import { createServiceApp, listen, silentLogger } from "@core/kit";
import { applyMigrations, openDatabase } from "@core/storage";
import { remoteResolvers, requireCaller, ServiceTokenClient } from "@core/service-auth";
import { createApp as createIam } from "../services/iam/src/app.js";
import { createApp as createRegistry } from "../services/platform-registry/src/app.js";
import { freePort, REGISTRY_SECRET, testConfig } from "../services/iam/test/support/harness.js";

const seconds = Number(process.env.BENCH_SECONDS ?? 5);
const connections = Number(process.env.BENCH_CONNECTIONS ?? 50);
const coldTokens = Number(process.env.BENCH_COLD_TOKENS ?? 50_000);

interface Run {
  url: string;
  method: "GET" | "POST";
  headers: Record<string, string>;
  body?: string;
  /** a file of request bodies, one a line, sent in turn (the cold run) */
  bodiesFile?: string;
}

/** One autocannon run from a separate process (bench/load.mjs), so client and server do not share a thread. */
function load(title: string, run: Run): Promise<number> {
  return new Promise((resolveRun, reject) => {
    const child = fork(resolve("bench/load.mjs"));
    child.once("error", reject);
    child.once("message", (m: { rate: number; p50: number; p99: number; errors: number }) => {
      console.log(
        `${title.padEnd(46)} ${m.rate.toFixed(0).padStart(7)} req/s   p50 ${String(m.p50).padStart(3)} ms   p99 ${String(m.p99).padStart(3)} ms${m.errors ? `   (${m.errors} errors/non-2xx)` : ""}`,
      );
      resolveRun(m.rate);
    });
    child.send({ ...run, connections, seconds });
  });
}

// bundled into node_modules/.cache, so the migrations are found from the repository root
const iamMigrations = resolve("services/iam/drizzle");
const registryMigrations = resolve("services/platform-registry/drizzle");

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
const registry = createRegistry({
  db: database.db,
  logger: silentLogger(),
  credentials: remoteResolvers({
    iamUrl,
    serviceId: "platform-registry",
    tokens: new ServiceTokenClient(iamUrl, { serviceId: "platform-registry", secret: REGISTRY_SECRET }),
  }),
});
const registryServer = await listen(registry, registryPort, "127.0.0.1");

// the credential middleware alone: a resource service's route that does no work of its own
const resolvers = remoteResolvers({
  iamUrl,
  serviceId: "platform-registry",
  tokens: new ServiceTokenClient(iamUrl, { serviceId: "platform-registry", secret: REGISTRY_SECRET }),
});
const guarded = createServiceApp({ service: "bench", title: "bench", logger: silentLogger() });
guarded.get("/whoami", async (c) => {
  const caller = await requireCaller(c, resolvers);
  return c.json({ userId: caller.kind === "principal" ? caller.principal.userId : null });
});
const guardedServer = await listen(guarded, 0, "127.0.0.1");

// one signed-up user, plus many extra sessions of theirs for the cold run
const signUp = await fetch(`${iamUrl}/api/auth/sign-up/email`, {
  method: "POST",
  headers: { "content-type": "application/json", origin: iamUrl },
  body: JSON.stringify({ email: "bench@example.com", password: "correct-horse-battery", name: "Bench" }),
});
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

console.log(`validate-session benchmark: ${seconds} s per run, ${connections} connections, database ${database.kind}, node ${process.version}`);
const post = (body: string) => ({
  method: "POST" as const,
  headers: { "content-type": "application/json", authorization: `Bearer ${serviceToken}` },
  body,
});

const rawRate = await load("raw node:http (same body, same client)", { url: `${rawUrl}/`, ...post(JSON.stringify({ token })) });
const warm = await load("POST /api/validate-session, warm (one token)", { url: `${iamUrl}/api/validate-session`, ...post(JSON.stringify({ token })) });
const bodiesFile = join(mkdtempSync(join(tmpdir(), "core-bench-")), "bodies.txt");
writeFileSync(bodiesFile, tokens.map((t) => JSON.stringify({ token: t })).join("\n"));
const cold = await load(`POST /api/validate-session, cold (${coldTokens} tokens)`, {
  url: `${iamUrl}/api/validate-session`,
  ...post(""),
  bodiesFile,
});
const middleware = await load("credential middleware, route doing nothing", {
  url: `${guardedServer.url}/whoami`,
  method: "GET",
  headers: { authorization: `Bearer ${token}` },
});
const registryRead = await load(`registry GET /platforms (middleware + ${database.kind} read)`, {
  url: `http://127.0.0.1:${registryPort}/platforms`,
  method: "GET",
  headers: { authorization: `Bearer ${token}` },
});

console.log("");
console.log(`warm validate-session / raw node:http     ${(warm / rawRate).toFixed(2)}   (target ≥ 0.50)`);
console.log(`cold validate-session / raw node:http     ${(cold / rawRate).toFixed(2)}`);
console.log(`credential middleware / raw node:http     ${(middleware / rawRate).toFixed(2)}`);
console.log(`registry read / raw node:http             ${(registryRead / rawRate).toFixed(2)}`);

await guardedServer.close();
await registryServer.close();
await iamServer.close();
raw.close();
await database.close();
process.exit(0);
