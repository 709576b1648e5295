import { createServer, type Server } from "node:http";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openFreshPostgres } from "@core/storage";
import { launch, replicaPorts, until, type Launched } from "./support/launched.js";

/**
 * `npm start -- --replicas 2` on one PostgreSQL database (DESIGN §1): every service twice, in two
 * processes that share nothing but the database. What one replica does, the other sees; what a
 * worker does, no other worker does again; races between replicas end as they end on one.
 */
const url = process.env.TEST_DATABASE_URL;
const PASSWORD = "correct-horse-battery";
const DAY = 86_400;

type Person = { token: string; userId: string; email: string; cookie: string };

describe.skipIf(!url)("two replicas of every service on one PostgreSQL", { timeout: 120_000 }, () => {
  let database: Awaited<ReturnType<typeof openFreshPostgres>>;
  let sql: pg.Client;
  let replicas: Launched;
  let at: Awaited<ReturnType<typeof replicaPorts>>["url"];
  const dataDir = mkdtempSync(join(tmpdir(), "core-replicas-"));
  let receiver: Server;
  const received: string[] = [];
  let operator: Person;
  /** every credential this run handed out or tried: none may appear in a log line (issue 26) */
  const secrets = new Set<string>([PASSWORD]);

  const post = async (base: string, path: string, body: unknown, token?: string) =>
    fetch(`${base}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: JSON.stringify(body),
    });
  /** org setup is a browser's form: the session cookie, from the page's own origin (each replica's public address is localhost) */
  const orgSetup = (replica: number, person: Person, name: string, slug: string) =>
    fetch(`${at("iam", replica)}/api/core/org-setup`, {
      method: "POST",
      headers: { "content-type": "application/json", cookie: person.cookie, origin: at("iam", replica).replace("127.0.0.1", "localhost") },
      body: JSON.stringify({ name, slug }),
    });
  const json = async (response: Response) => {
    const text = await response.text();
    if (!response.ok) throw new Error(`${response.url} answered ${response.status}: ${text}`);
    return JSON.parse(text);
  };
  const signUp = async (email: string, replica = 0): Promise<Person> => {
    const response = await post(at("iam", replica), "/api/auth/sign-up/email", { email, password: PASSWORD, name: email.split("@")[0] });
    const cookie = (response.headers.get("set-cookie") ?? "").split(";")[0]!;
    const body = await json(response);
    secrets.add(body.token);
    secrets.add(decodeURIComponent(cookie.slice(cookie.indexOf("=") + 1)));
    return { token: body.token, userId: body.user.id, email, cookie };
  };
  const rows = async <T>(text: string, values: unknown[] = []) => (await sql.query(text, values)).rows as T[];

  beforeAll(async () => {
    database = await openFreshPostgres(url!);
    sql = new pg.Client({ connectionString: database.url });
    await sql.connect();
    receiver = createServer((req, res) => {
      received.push(String(req.headers["core-event-id"]));
      req.resume();
      req.on("end", () => res.end("ok"));
    });
    await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
    const ports = await replicaPorts(2);
    at = ports.url;
    replicas = launch(
      {
        ...ports.env,
        DATABASE_URL: database.url,
        CORE_DATA_DIR: dataDir,
        CORE_BILLING_TEST_CLOCK: "1",
        CORE_BILLING_WORKER_INTERVAL_MS: "200",
        CORE_BILLING_WEBHOOK_ALLOW_PRIVATE: "1",
        CORE_RATE_LIMIT_SIGN_UP: "100",
      },
      ["--replicas", "2"],
    );
    await replicas.running;
    operator = await signUp("operator@replicas.example");
    await json(await post(at("iam", 1), "/api/core/bootstrap", {}, operator.token));
  });

  afterAll(async () => {
    expect(await replicas?.stop()).toBe(0);
    await sql?.end();
    await database?.close();
    receiver?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("prints every replica's address, and each answers from its own process", async () => {
    for (const service of ["iam", "billing", "stack-registry", "platform-registry"] as const) {
      expect(replicas.output()).toContain(`${at(service, 0)}  ${at(service, 1)}`);
      for (const replica of [0, 1]) expect((await fetch(`${at(service, replica)}/health`)).status).toBe(200);
    }
    // two processes wrote the logs: each line names its replica
    expect(replicas.output()).toMatch(/"replica":0/);
    expect(replicas.output()).toMatch(/"replica":1/);
  });

  it("refuses a session revoked through one IAM replica in every service of every replica within 5 s", async () => {
    const person = await signUp("revoked@replicas.example", 1);
    const setup = await json(await orgSetup(0, person, "Revoked", "revoked"));
    // a read of each service that takes this session; the stack registry's writes are the operator's,
    // so a tenant's valid session is refused there with 403, a revoked one with 401
    const asks = [0, 1].flatMap((replica) => [
      { address: `${at("iam", replica)}/api/core/session`, method: "GET", before: 200 },
      { address: `${at("platform-registry", replica)}/platforms/${setup.platformId}/stacks`, method: "GET", before: 200 },
      { address: `${at("billing", replica)}/subscription?platformId=${setup.platformId}`, method: "GET", before: 200 },
      { address: `${at("stack-registry", replica)}/api/v1/stacks`, method: "POST", before: 403 },
    ]);
    const status = async ({ address, method }: { address: string; method: string }) => {
      const response = await fetch(address, {
        method,
        headers: { authorization: `Bearer ${person.token}`, "content-type": "application/json" },
        ...(method === "POST" ? { body: JSON.stringify({ name: "revoked-stack", displayName: "R", description: "R" }) } : {}),
      });
      await response.body?.cancel();
      return response.status;
    };
    // every replica has the session in its cache now
    for (const ask of asks) expect(await status(ask), ask.address).toBe(ask.before);
    const revokedAt = Date.now();
    expect((await post(at("iam", 0), "/api/auth/sign-out", {}, person.token)).status).toBe(200);
    const refusedAfter = await Promise.all(
      asks.map((ask) => until(async () => ((await status(ask)) === 401 ? Date.now() - revokedAt : false), `${ask.address} to refuse the session`, 10_000, 100)),
    );
    expect(Math.max(...refusedAfter)).toBeLessThanOrEqual(5_000);
  });

  it("counts wrong passwords and wrong API keys once across replicas", async () => {
    const person = await signUp("limited@replicas.example");
    // sign-in: 10 a minute per client address (CORE_RATE_LIMIT_SIGN_IN), whichever replica answers
    const signIns: number[] = [];
    for (let i = 0; i < 12; i++) {
      const response = await post(at("iam", i % 2), "/api/auth/sign-in/email", { email: person.email, password: "wrong-password-1" });
      await response.body?.cancel();
      signIns.push(response.status);
    }
    expect(signIns.slice(0, 10).every((s) => s === 401)).toBe(true);
    expect(signIns.slice(10)).toEqual([429, 429]);
    // wrong API keys: 30 a minute per service and client address (CORE_RATE_LIMIT_APIKEY_FAILURES)
    const keys: number[] = [];
    for (let i = 0; i < 32; i++) {
      secrets.add(`core_wrong${i}`);
      const response = await fetch(`${at("platform-registry", i % 2)}/platforms`, { headers: { "x-api-key": `core_wrong${i}` } });
      await response.body?.cancel();
      keys.push(response.status);
    }
    expect(keys.slice(0, 30).every((s) => s === 401)).toBe(true);
    expect(keys.slice(30)).toEqual([429, 429]);
  });

  it("ends races between replicas as on one: org setup, publish and upgrade", async () => {
    const [first, second] = [await signUp("racer1@replicas.example"), await signUp("racer2@replicas.example", 1)];
    const setups = await Promise.all([
      orgSetup(0, first, "Race", "race"),
      orgSetup(1, second, "Race", "race"),
    ]);
    expect(setups.map((r) => r.status).sort()).toEqual([201, 409]);
    const won = (await setups.find((r) => r.status === 201)!.json()) as { platformId: string };
    expect(await rows(`select slug from iam.organization where slug = 'race'`)).toHaveLength(1);
    expect(await rows(`select id from registry.platforms where id = $1`, [won.platformId])).toHaveLength(1);
    // the loser's organization was rolled back with its platform: one platform for one organization
    expect(await rows(`select count(*)::int as n from registry.platforms`)).toEqual(await rows(`select count(*)::int as n from iam.organization where slug <> 'core-operator'`));

    await json(await post(at("stack-registry", 0), "/api/v1/stacks", { name: "raced", displayName: "Raced", description: "Published twice at once" }, operator.token));
    const publishes = await Promise.all(
      [0, 1].map((replica) => post(at("stack-registry", replica), "/api/v1/stacks/raced/versions", { version: "1.0.0", stackDefinition: { replica }, coreSdkVersion: "1.0.0" }, operator.token)),
    );
    expect(publishes.map((r) => r.status).sort()).toEqual([201, 409]);
    expect(((await json(await fetch(`${at("stack-registry", 1)}/api/v1/stacks/raced/versions`, { headers: { authorization: `Bearer ${operator.token}` } }))).data as unknown[]).length).toBe(1);

    const owner = setups[0]!.status === 201 ? first : second;
    const upgrade = { planId: "plan_starter", paymentMethodId: "pm_card_visa", billingEmail: owner.email, idempotencyKey: crypto.randomUUID() };
    const upgrades = await Promise.all([0, 1].map((replica) => post(at("billing", replica), "/api/billing/upgrade", upgrade, owner.token)));
    const statuses = upgrades.map((r) => r.status).sort();
    // the same key at once: one runs, the other is told it is in use (or, if it came second, replays)
    expect([[200, 200], [200, 409]]).toContainEqual(statuses);
    const again = await json(await post(at("billing", 1), "/api/billing/upgrade", upgrade, owner.token));
    const paid = await rows<{ n: number }>(`select count(*)::int as n from billing.charges where status = 'succeeded' and invoice_id = $1`, [again.invoice.id]);
    expect(paid).toEqual([{ n: 1 }]);
    expect(await rows(`select id from billing.subscriptions where platform_id = $1 and current and tier = 'starter'`, [won.platformId])).toHaveLength(1);
  });

  it("renews, syncs tiers and delivers webhooks once, with both replicas' workers running", async () => {
    const endpoint = await json(await post(at("billing", 0), "/operator/webhook-endpoints", { url: `http://127.0.0.1:${(receiver.address() as { port: number }).port}/hook` }, operator.token));
    secrets.add(endpoint.secret);
    const platforms: string[] = [];
    for (let i = 0; i < 4; i++) {
      const owner = await signUp(`renewed${i}@replicas.example`, i % 2);
      const setup = await json(await orgSetup(i % 2, owner, `Renewed ${i}`, `renewed-${i}`));
      platforms.push(setup.platformId);
      await json(await post(at("billing", i % 2), "/api/billing/upgrade", { planId: "plan_starter", paymentMethodId: "pm_card_visa", billingEmail: owner.email, idempotencyKey: crypto.randomUUID() }, owner.token));
    }
    // a month and a bit: every subscription renews once, while both replicas' workers look every 200 ms
    for (let step = 0; step < 4; step++) await json(await post(at("billing", step % 2), "/operator/test-clock/advance", { seconds: 8 * DAY }, operator.token));

    const invoices = await rows<{ platformId: string; n: number; periods: number }>(
      `select s.platform_id as "platformId", count(*)::int as n, count(distinct i.period_start)::int as periods
         from billing.invoices i join billing.subscriptions s on s.id = i.subscription_id
        where s.platform_id = any($1) group by s.platform_id`,
      [platforms],
    );
    expect(invoices).toHaveLength(4);
    for (const row of invoices) {
      expect(row.n, `${row.platformId} has one invoice per period`).toBe(row.periods);
      expect(row.periods).toBe(2);
    }
    const charges = await rows<{ n: number }>(
      `select count(*)::int as n from billing.charges c join billing.invoices i on i.id = c.invoice_id join billing.subscriptions s on s.id = i.subscription_id
        where s.platform_id = any($1) group by c.invoice_id having count(*) > 1`,
      [platforms],
    );
    expect(charges).toEqual([]);

    // the registry took each platform's tier once: one PATCH per platform, from whichever replica claimed it
    await until(async () => (await rows(`select 1 from billing.tier_sync where platform_id = any($1) and version = synced_version`, [platforms])).length === 4, "the tiers to reach the registry");
    const patches = replicas
      .output()
      .split("\n")
      .filter((line) => line.includes('"service":"platform-registry"') && line.includes('"method":"PATCH"'));
    for (const platformId of platforms) expect(patches.filter((line) => line.includes(`/platforms/${platformId}"`))).toHaveLength(1);

    // every event delivered once, though both replicas' dispatchers ran
    const events = await rows<{ id: string }>(`select id from billing.webhook_events`);
    expect(events.length).toBeGreaterThan(8);
    await until(() => received.length >= events.length, "every webhook to arrive", 20_000);
    await new Promise((r) => setTimeout(r, 1_000));
    expect([...received].sort()).toEqual(events.map((e) => e.id).sort());
  });

  it("prunes old usage events once, with both replicas' retention running: every event tallied once", async () => {
    const owner = await signUp("retained@replicas.example", 1);
    const setup = await json(await orgSetup(1, owner, "Retained", "retained"));
    await json(await post(at("billing", 1), "/api/billing/upgrade", { planId: "plan_starter", paymentMethodId: "pm_card_visa", billingEmail: owner.email, idempotencyKey: crypto.randomUUID() }, owner.token));
    const clock = await json(await fetch(`${at("billing", 0)}/operator/test-clock`, { headers: { authorization: `Bearer ${operator.token}` } }));
    // 40 batches of 50, sent to both replicas at once
    const batches = Array.from({ length: 40 }, (_, b) =>
      Array.from({ length: 50 }, (_, e) => ({ id: `ret-${b}-${e}`, platformId: setup.platformId, meter: "api_requests", quantity: 1, timestamp: clock.now })),
    );
    const answers = await Promise.all(batches.map(async (events, b) => json(await post(at("billing", b % 2), "/usage/events", { events }, operator.token))));
    expect(answers.reduce((sum, a) => sum + a.accepted, 0)).toBe(2_000);
    // past the 35 days an event's id is remembered: both replicas' workers prune, each its own rows
    await json(await post(at("billing", 0), "/operator/test-clock/advance", { seconds: 36 * DAY }, operator.token));
    await until(async () => (await rows(`select 1 from billing.usage_events where id like 'ret-%' limit 1`)).length === 0, "the old events to be pruned", 20_000, 200);
    expect(await rows(`select sum(events)::int as events, sum(quantity) = 2000 as exact from billing.usage_pruned where platform_id = $1 and meter = 'api_requests'`, [setup.platformId])).toEqual([
      { events: 2_000, exact: true },
    ]);
  });

  it("wrote no credential of the whole run in any log line: session tokens, cookies, passwords, guessed API keys, webhook secrets", () => {
    const output = replicas.output();
    expect(output.split("\n").length).toBeGreaterThan(200);
    expect(secrets.size).toBeGreaterThan(20);
    for (const secret of secrets) expect(secret.length).toBeGreaterThan(8);
    expect([...secrets].filter((secret) => output.includes(secret))).toEqual([]);
  });
});
