import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fetchRetrying, launch, replicaPorts, until, type Launched } from "./support/launched.js";
import { postgresBin, startPrivatePostgres, type PrivatePostgres } from "./support/private-postgres.js";

/**
 * Faults survived (DESIGN §1, §3): the database stopped under load and started again, and a replica
 * killed in the middle of writes. The database is a PostgreSQL server of this test's own, so
 * stopping it touches no other test.
 */
const PASSWORD = "correct-horse-battery";
/** No request may wait longer than this for an answer while the database is gone (README: a connection is waited for 5 s at most). */
const FAIL_FAST_MS = 6_000;

if (process.env.CI && !postgresBin()) throw new Error("CI is set but the PostgreSQL server binaries are missing: the fault tests would be skipped");

type Person = { token: string; email: string; cookie: string };
type Outcome = { what: string; status: number; code?: string; ms: number; at: number };

async function json(response: Response) {
  const text = await response.text();
  if (!response.ok) throw new Error(`${response.url} answered ${response.status}: ${text}`);
  return JSON.parse(text);
}

/** Everything one set of running services needs from a test: addresses, people, a platform. */
async function seed(at: (service: "iam" | "billing" | "stack-registry" | "platform-registry", replica: number) => string, tag: string) {
  const request = (base: string, path: string, body: unknown, headers: Record<string, string>) =>
    [`${base}${path}`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) }] as const;
  /** a write under test: its answer or failure is what the test looks at */
  const post = (base: string, path: string, body: unknown, headers: Record<string, string> = {}) => fetch(...request(base, path, body, headers));
  /** a set-up step, sent as a real client sends it: a 503 (the database slower than its budget on a loaded machine) is asked again */
  const setUp = (base: string, path: string, body: unknown, headers: Record<string, string> = {}) => fetchRetrying(...request(base, path, body, headers));
  const signUp = async (email: string): Promise<Person> => {
    const response = await setUp(at("iam", 0), "/api/auth/sign-up/email", { email, password: PASSWORD, name: email.split("@")[0] });
    const cookie = (response.headers.get("set-cookie") ?? "").split(";")[0]!;
    const body = await json(response);
    return { token: body.token, email, cookie };
  };
  const operator = await signUp(`operator-${tag}@faults.example`);
  await json(await setUp(at("iam", 0), "/api/core/bootstrap", {}, { authorization: `Bearer ${operator.token}` }));
  const owner = await signUp(`owner-${tag}@faults.example`);
  const setup = await json(
    await setUp(at("iam", 0), "/api/core/org-setup", { name: "Faults", slug: `faults-${tag}` }, { cookie: owner.cookie, origin: at("iam", 0).replace("127.0.0.1", "localhost") }),
  );
  await json(
    await setUp(at("billing", 0), "/api/billing/upgrade", { planId: "plan_starter", paymentMethodId: "pm_card_visa", billingEmail: owner.email, idempotencyKey: crypto.randomUUID() }, { authorization: `Bearer ${owner.token}` }),
  );
  await json(await setUp(at("stack-registry", 0), "/api/v1/stacks", { name: `stack-${tag}`, displayName: "Stack", description: "Published under fire" }, { authorization: `Bearer ${operator.token}` }));
  return { operator, owner, platformId: setup.platformId as string, post, signUp };
}

describe.skipIf(!postgresBin())("the database stopped for 20 s under load", { timeout: 180_000 }, () => {
  let server: PrivatePostgres;
  let services: Launched;
  let at: Awaited<ReturnType<typeof replicaPorts>>["url"];
  const dataDir = mkdtempSync(join(tmpdir(), "core-faults-"));

  beforeAll(async () => {
    server = await startPrivatePostgres();
    const ports = await replicaPorts(1);
    at = ports.url;
    services = launch({ ...ports.env, DATABASE_URL: server.url, CORE_DATA_DIR: dataDir, CORE_RATE_LIMIT: "off", CORE_BILLING_WORKER_INTERVAL_MS: "500", LOG_LEVEL: "warn" });
    await services.running;
  });
  afterAll(async () => {
    await services?.stop();
    await server?.destroy();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("answers degraded and 503 UPSTREAM_UNAVAILABLE fast, never 500, recovers without a restart, and counts refused usage once when re-sent", async () => {
    const { operator, owner, platformId, post } = await seed(at, "stop");
    const outcomes: Outcome[] = [];
    const batches: { events: object[]; first: number }[] = [];
    let phase = "before";
    const started = Date.now();
    const timed = async (what: string, request: () => Promise<Response>) => {
      const begun = Date.now();
      let status = 0;
      let code: string | undefined;
      try {
        const response = await request();
        status = response.status;
        const text = await response.text();
        if (status >= 400) code = (JSON.parse(text) as { error?: { code?: string } }).error?.code;
      } catch {
        status = -1;
      }
      outcomes.push({ what: `${phase} ${what}`, status, code, ms: Date.now() - begun, at: begun - started });
      return status;
    };
    const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
    const now = Math.floor(Date.now() / 1000);
    let sent = 0;
    const requests: [string, () => Promise<Response>][] = [
      ["iam session", () => fetch(`${at("iam", 0)}/api/core/session`, { headers: bearer(owner.token), signal: AbortSignal.timeout(30_000) })],
      ["registry stacks", () => fetch(`${at("platform-registry", 0)}/platforms/${platformId}/stacks`, { headers: bearer(owner.token), signal: AbortSignal.timeout(30_000) })],
      ["billing subscription", () => fetch(`${at("billing", 0)}/subscription?platformId=${platformId}`, { headers: bearer(owner.token), signal: AbortSignal.timeout(30_000) })],
      ["stack registry list", () => fetch(`${at("stack-registry", 0)}/api/v1/stacks`, { headers: bearer(owner.token), signal: AbortSignal.timeout(30_000) })],
      ["sign-in", () => post(at("iam", 0), "/api/auth/sign-in/email", { email: owner.email, password: PASSWORD })],
    ];
    const sendBatch = async () => {
      const events = Array.from({ length: 5 }, () => ({ id: `evt-${++sent}`, platformId, meter: "api_requests", quantity: 1, timestamp: now }));
      const status = await timed("usage batch", () => post(at("billing", 0), "/usage/events", { events }, bearer(operator.token)));
      batches.push({ events, first: status });
    };
    let loading = true;
    const workers = Array.from({ length: 4 }, async (_, worker) => {
      for (let i = worker; loading; i++) {
        if (i % 3 === 0) await sendBatch();
        else {
          const [what, request] = requests[i % requests.length]!;
          await timed(what, request);
        }
        await new Promise((r) => setTimeout(r, 20));
      }
    });
    const health = async () =>
      Promise.all(
        (["iam", "billing", "stack-registry", "platform-registry"] as const).map(async (service) => {
          try {
            const response = await fetch(`${at(service, 0)}/health`, { signal: AbortSignal.timeout(5_000) });
            return { status: response.status, body: (await response.json()) as { status: string; checks: Record<string, { status: string }> } };
          } catch {
            // a kept-alive connection the server closed after 5 s idle (the outage's wait) may be
            // reset as it is reused: the next poll asks on a new one
            return { status: 0, body: { status: "unknown", checks: {} } };
          }
        }),
      );

    await new Promise((r) => setTimeout(r, 2_000));
    phase = "down";
    const stoppedAt = Date.now();
    await server.stop();
    // every service with a database says so within seconds
    let lastHealth: Awaited<ReturnType<typeof health>> = [];
    const degradedAfter = await until(
      async () => {
        lastHealth = await health();
        return lastHealth.every((h) => h.status === 503 && h.body.status === "degraded" && h.body.checks.database?.status === "fail") ? Date.now() - stoppedAt : false;
      },
      "every service to answer degraded",
      10_000,
      250,
    ).catch((err: Error) => {
      // what the services said last, and what they logged, to tell why
      throw new Error(`${err.message}\nlast /health answers: ${JSON.stringify(lastHealth)}\nlog tail:\n${services.output().slice(-3000)}`);
    });
    expect(degradedAfter).toBeLessThan(5_000);
    await new Promise((r) => setTimeout(r, Math.max(0, 20_000 - (Date.now() - stoppedAt))));
    phase = "recovering";
    const restartedAt = Date.now();
    await server.start();
    const healthyAfter = await until(async () => ((await health()).every((h) => h.status === 200) ? Date.now() - restartedAt : false), "every service to be healthy again", 30_000, 250);
    phase = "after";
    await new Promise((r) => setTimeout(r, 3_000));
    loading = false;
    await Promise.all(workers);

    const down = outcomes.filter((o) => o.what.startsWith("down "));
    const after = outcomes.filter((o) => o.what.startsWith("after "));
    expect(down.length).toBeGreaterThan(20);
    // never a 500, never a dropped connection, never an unexplained refusal
    const kinds = (list: Outcome[]) => [...new Set(list.map((o) => `${o.what} ${o.status} ${o.code ?? ""}`))].sort();
    expect(kinds(outcomes.filter((o) => o.status === -1 || (o.status >= 500 && o.status !== 503)))).toEqual([]);
    expect(kinds(down.filter((o) => o.status >= 400 && !(o.status === 503 && o.code === "UPSTREAM_UNAVAILABLE")))).toEqual([]);
    expect(down.filter((o) => o.status === 503).length).toBeGreaterThan(10);
    // failing fast: no request waited out the outage
    expect(Math.max(...down.map((o) => o.ms))).toBeLessThan(FAIL_FAST_MS);
    // recovered in place: healthy within seconds of the restart, and every request after it answered
    expect(healthyAfter).toBeLessThan(15_000);
    expect(after.length).toBeGreaterThan(10);
    expect(after.filter((o) => o.status >= 400)).toEqual([]);
    expect(services.child.exitCode).toBeNull();
    console.log(
      `database stopped 20 s: degraded after ${degradedAfter} ms, ${down.length} requests while down (slowest ${Math.max(...down.map((o) => o.ms))} ms), healthy ${healthyAfter} ms after the restart`,
    );

    // every batch again, as a client that did not get (or did not trust) its answer would send it
    const refused = batches.filter((b) => b.first !== 200);
    expect(refused.length).toBeGreaterThan(0);
    for (const batch of batches) {
      const answer = await json(await post(at("billing", 0), "/usage/events", { events: batch.events }, bearer(operator.token)));
      expect(answer.rejected).toBe(0);
      if (batch.first === 200) expect(answer.duplicates).toBe(5);
      else expect(answer.accepted + answer.duplicates).toBe(5);
    }
    // counted once each: the period's total is the number of distinct events
    const usage = await json(await fetch(`${at("billing", 0)}/usage/current?platformId=${platformId}`, { headers: bearer(owner.token) }));
    expect(usage.meters.find((m: { meter: string }) => m.meter === "api_requests").quantity).toBe(String(sent));
  });
});

describe.skipIf(!postgresBin())("a replica killed in the middle of writes", { timeout: 180_000 }, () => {
  let server: PrivatePostgres;
  let replicas: Launched;
  let at: Awaited<ReturnType<typeof replicaPorts>>["url"];
  let sql: pg.Client;
  const dataDir = mkdtempSync(join(tmpdir(), "core-kill-"));

  beforeAll(async () => {
    server = await startPrivatePostgres();
    const ports = await replicaPorts(2);
    at = ports.url;
    replicas = launch(
      { ...ports.env, DATABASE_URL: server.url, CORE_DATA_DIR: dataDir, CORE_RATE_LIMIT: "off", CORE_ORG_SETUP_RECOVERY_SECONDS: "15", LOG_LEVEL: "warn" },
      ["--replicas", "2"],
    );
    await replicas.running;
    sql = new pg.Client({ connectionString: server.url });
    await sql.connect();
  });
  afterAll(async () => {
    await replicas?.stop();
    await sql?.end();
    await server?.destroy();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("leaves no organization, version, upgrade or usage batch half-written, and the supervisor starts the replica again", async () => {
    const { operator, platformId, post, signUp } = await seed(at, "kill");
    const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
    const people = await Promise.all(Array.from({ length: 30 }, (_, i) => signUp(`writer${i}@faults.example`)));
    const now = Math.floor(Date.now() / 1000);
    const batches: object[][] = [];
    let writing = true;
    let cutOff = 0;
    // writes to both replicas at once: org set-ups (then an upgrade of each), publishes, usage batches
    const writers = [
      (async () => {
        for (let i = 0; writing && i < people.length; i++) {
          const person = people[i]!;
          const replica = i % 2;
          const origin = at("iam", replica).replace("127.0.0.1", "localhost");
          await post(at("iam", replica), "/api/core/org-setup", { name: `Writer ${i}`, slug: `writer-${i}` }, { cookie: person.cookie, origin }).catch(() => cutOff++);
          await post(at("billing", replica), "/api/billing/upgrade", { planId: "plan_growth", paymentMethodId: "pm_card_visa", billingEmail: person.email, idempotencyKey: crypto.randomUUID() }, bearer(person.token)).catch(() => cutOff++);
        }
      })(),
      (async () => {
        for (let i = 0; writing; i++) {
          const definition = { services: Array.from({ length: 50 }, (_, s) => ({ name: `svc-${s}`, image: `registry/app-${s}:${i}` })) };
          await post(at("stack-registry", i % 2), "/api/v1/stacks/stack-kill/versions", { version: `1.0.${i}`, stackDefinition: definition, coreSdkVersion: "1.0.0" }, bearer(operator.token)).catch(() => cutOff++);
        }
      })(),
      (async () => {
        for (let i = 0; writing; i++) {
          const events = Array.from({ length: 200 }, (_, e) => ({ id: `kill-${i}-${e}`, platformId, meter: "api_requests", quantity: 1, timestamp: now, tenantId: "t" }));
          batches.push(events);
          await post(at("billing", i % 2), "/usage/events", { events }, bearer(operator.token)).catch(() => cutOff++);
        }
      })(),
    ];
    await new Promise((r) => setTimeout(r, 1_500));
    const replica1 = execFileSync("pgrep", ["-P", String(replicas.child.pid)]).toString().trim().split("\n").map(Number).sort((a, b) => a - b)[1]!;
    process.kill(replica1, "SIGKILL");
    await new Promise((r) => setTimeout(r, 1_000));
    writing = false;
    await Promise.all(writers);
    await until(() => /replica 1 is running again/.test(replicas.output()), "the supervisor to start replica 1 again", 30_000);
    expect((await fetch(`${at("iam", 1)}/health`)).status).toBe(200);
    // the kill cut requests off (in flight, or refused until the replica was back)
    expect(cutOff).toBeGreaterThan(0);

    const rows = async <T>(text: string) => (await sql.query(text)).rows as T[];
    // organizations: every one linked to a platform of the registry, or an open set-up the sweeper finishes
    await until(async () => (await rows(`select 1 from iam.org_setups`)).length === 0, "the sweeper to finish interrupted set-ups", 40_000, 500);
    expect(await rows(`select o.slug from iam.organization o left join registry.platforms p on p.id = o.platform_id where o.org_type = 'tenant' and p.id is null`)).toEqual([]);
    expect(await rows(`select p.slug from registry.platforms p left join iam.organization o on o.platform_id = p.id where o.id is null`)).toEqual([]);
    expect(await rows(`select o.slug from iam.organization o left join iam.member m on m.organization_id = o.id and m.role = 'owner' where m.id is null`)).toEqual([]);
    // versions: each whole, with its definition
    expect(await rows(`select version from stacks.versions where stack_definition is null or jsonb_array_length(stack_definition->'services') <> 50`)).toEqual([]);
    // upgrades: every paid subscription has its paid invoice and one charge for it, every charge its invoice
    expect(
      await rows(`select s.id from billing.subscriptions s where s.tier <> 'free' and s.current and not exists (select 1 from billing.invoices i where i.subscription_id = s.id and i.status = 'paid')`),
    ).toEqual([]);
    expect(await rows(`select invoice_id from billing.charges where status = 'succeeded' group by invoice_id having count(*) > 1`)).toEqual([]);
    // usage: a batch is all there or not at all, and re-sending every batch makes each whole, counted once
    const partial = await rows(`select split_part(id, '-', 2) as batch, count(*)::int as n from billing.usage_events where id like 'kill-%' group by 1 having count(*) <> 200`);
    expect(partial).toEqual([]);
    for (const events of batches) {
      const answer = await json(await post(at("billing", 0), "/usage/events", { events }, bearer(operator.token)));
      expect(answer.accepted + answer.duplicates).toBe(200);
    }
    const n = (await rows<{ n: number }>(`select count(*)::int as n from billing.usage_events where id like 'kill-%'`))[0]!.n;
    expect(n).toBe(batches.length * 200);
    const swept = replicas.output().split("\n").filter((line) => line.includes("finished an interrupted organization set-up")).length;
    console.log(`replica 1 killed: ${cutOff} requests cut off, ${swept} interrupted set-ups finished by the sweeper, ${batches.length} usage batches whole`);
  });
});
