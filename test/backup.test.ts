import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { openFreshPostgres } from "@core/storage";
import { launch, replicaPorts, type Launched } from "./support/launched.js";

/**
 * Backups and restore as the production guide gives them (docs/vault/guides/running-on-postgresql.md):
 * data written through the services, `pg_dump -Fc` of the live database, `pg_restore` into a new
 * database, and the services started on the restored one see every piece of it.
 */
const url = process.env.TEST_DATABASE_URL;
const PASSWORD = "correct-horse-battery";
const tool = (name: string) => ["/usr/bin", "/usr/local/bin", "/usr/lib/postgresql/15/bin"].map((dir) => join(dir, name)).find(existsSync) ?? null;
const PG_DUMP = tool("pg_dump");
const PG_RESTORE = tool("pg_restore");

if (process.env.CI && url && !(PG_DUMP && PG_RESTORE)) throw new Error("CI is set but pg_dump or pg_restore is missing: the backup test would be skipped");

describe.skipIf(!url || !PG_DUMP || !PG_RESTORE)("backup and restore with pg_dump and pg_restore", { timeout: 180_000 }, () => {
  const dir = mkdtempSync(join(tmpdir(), "core-backup-"));
  const running: Launched[] = [];
  const dropLater: string[] = [];
  let database: Awaited<ReturnType<typeof openFreshPostgres>> | undefined;

  afterAll(async () => {
    for (const services of running) await services.stop();
    await database?.close();
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    for (const name of dropLater) await admin.query(`drop database if exists ${name} with (force)`);
    await admin.end();
    rmSync(dir, { recursive: true, force: true });
  });

  /** every service on `databaseUrl`, one process, with the secrets of `dir/data` (the operator keeps those apart from the dump) */
  async function start(databaseUrl: string) {
    const ports = await replicaPorts(1);
    const services = launch({ ...ports.env, DATABASE_URL: databaseUrl, CORE_DATA_DIR: join(dir, "data"), CORE_RATE_LIMIT: "off", LOG_LEVEL: "warn" });
    running.push(services);
    await services.running;
    return { services, at: (service: Parameters<typeof ports.url>[0]) => ports.url(service, 0) };
  }

  it("a dump of the live database, restored into a new one, is everything the services wrote", async () => {
    database = await openFreshPostgres(url!);
    const first = await start(database.url);
    const { at } = first;
    const json = async (response: Response) => {
      const text = await response.text();
      if (!response.ok) throw new Error(`${response.url} answered ${response.status}: ${text}`);
      return JSON.parse(text);
    };
    const post = (base: string, path: string, body: unknown, headers: Record<string, string> = {}) =>
      fetch(`${base}${path}`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) });
    const signUp = async (email: string) => {
      const response = await post(at("iam"), "/api/auth/sign-up/email", { email, password: PASSWORD, name: email.split("@")[0] });
      const cookie = (response.headers.get("set-cookie") ?? "").split(";")[0]!;
      return { ...(await json(response)), cookie, email } as { token: string; cookie: string; email: string };
    };
    const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

    // an operator, a tenant with a platform on a paid plan, a published stack version, usage
    const operator = await signUp("operator@backup.example");
    await json(await post(at("iam"), "/api/core/bootstrap", {}, bearer(operator.token)));
    const owner = await signUp("owner@backup.example");
    const setup = await json(await post(at("iam"), "/api/core/org-setup", { name: "Kept", slug: "kept" }, { cookie: owner.cookie, origin: at("iam").replace("127.0.0.1", "localhost") }));
    const platformId = setup.platformId as string;
    await json(await post(at("billing"), "/api/billing/upgrade", { planId: "plan_starter", paymentMethodId: "pm_card_visa", billingEmail: owner.email, idempotencyKey: crypto.randomUUID() }, bearer(owner.token)));
    await json(await post(at("stack-registry"), "/api/v1/stacks", { name: "kept-stack", displayName: "Kept", description: "Survives a restore" }, bearer(operator.token)));
    await json(
      await post(at("stack-registry"), "/api/v1/stacks/kept-stack/versions", { version: "1.2.3", stackDefinition: { services: [{ name: "web", image: "registry/web:1" }] }, coreSdkVersion: "1.0.0" }, bearer(operator.token)),
    );
    const events = Array.from({ length: 7 }, (_, i) => ({ id: `kept-${i}`, platformId, meter: "api_requests", quantity: 3, timestamp: Math.floor(Date.now() / 1000) }));
    expect((await json(await post(at("billing"), "/usage/events", { events }, bearer(operator.token)))).accepted).toBe(7);

    // what a client sees before: the same questions are asked of the restored copy
    const reads = async (base: (service: "iam" | "billing" | "stack-registry" | "platform-registry") => string) => ({
      session: (await json(await fetch(`${base("iam")}/api/core/session`, { headers: bearer(owner.token) }))).user.email,
      platform: (await json(await fetch(`${base("platform-registry")}/platforms/${platformId}`, { headers: bearer(owner.token) }))).slug,
      tier: (await json(await fetch(`${base("billing")}/subscription?platformId=${platformId}`, { headers: bearer(owner.token) }))).tier,
      invoices: (await json(await fetch(`${base("billing")}/invoices?platformId=${platformId}`, { headers: bearer(owner.token) }))).data.map((i: { id: string; status: string }) => `${i.id} ${i.status}`),
      usage: (await json(await fetch(`${base("billing")}/usage/current?platformId=${platformId}`, { headers: bearer(owner.token) }))).meters.find((m: { meter: string }) => m.meter === "api_requests").quantity,
      versions: (await json(await fetch(`${base("stack-registry")}/api/v1/stacks/kept-stack/versions`, { headers: bearer(operator.token) }))).data.map((v: { version: string }) => v.version),
    });
    const before = await reads(at);
    expect(before).toMatchObject({ session: owner.email, platform: "kept", tier: "starter", usage: "21", versions: ["1.2.3"] });
    expect(before.invoices.length).toBeGreaterThan(0);

    // the guide's commands: a dump of the running database, a new database, the restore
    const dump = join(dir, "core.dump");
    execFileSync(PG_DUMP!, ["-Fc", "-f", dump, "-d", database.url]);
    expect(statSync(dump).size).toBeGreaterThan(0);
    await first.services.stop();
    const restoredName = `core_restored_${Math.random().toString(36).slice(2, 10)}`;
    dropLater.push(restoredName);
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    await admin.query(`create database ${restoredName}`);
    await admin.end();
    const restoredUrl = new URL(url!);
    restoredUrl.pathname = `/${restoredName}`;
    execFileSync(PG_RESTORE!, ["--exit-on-error", "--no-owner", "-d", restoredUrl.toString(), dump]);

    // the services on the restored database: the same session, person, platform, plan, invoices, usage and stack
    const second = await start(restoredUrl.toString());
    expect(await reads(second.at)).toEqual(before);
    const signIn = await post(second.at("iam"), "/api/auth/sign-in/email", { email: owner.email, password: PASSWORD });
    expect(signIn.status).toBe(200);
    // and they keep working on it: a write lands after the restored rows
    const more = await json(await post(second.at("billing"), "/usage/events", { events: [...events, { ...events[0]!, id: "kept-after" }] }, bearer(operator.token)));
    expect(more).toMatchObject({ accepted: 1, duplicates: 7 });
  });
});
