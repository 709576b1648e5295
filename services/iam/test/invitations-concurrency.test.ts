import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listen, type RunningServer } from "@core/kit";
import { applyMigrations, rowsOf, testDatabases, type DatabaseHandle } from "@core/storage";
import { migrationsFolder } from "../src/index.js";
import { call, createIam, operator, tenantOrg, uniqueEmail, type Iam, type Operator } from "./support/harness.js";

/**
 * An invitation is unique per pending (organization, address) by an index, not by a check
 * (docs/vault/services/iam.md#Invitations): many invitations of one address sent at once, through
 * IAM's route and the auth library's `invite-member` over real HTTP, make exactly one.
 */
describe.each(testDatabases())("one pending invitation per address under concurrency on $name", ({ open }) => {
  let database: DatabaseHandle;
  let iam: Iam;
  let op: Operator;
  let server: RunningServer;
  beforeAll(async () => {
    database = await open();
    // invitations lapse within the sessions' hour, so the clock can pass one without ending the other
    iam = await createIam(database, { config: { invitationSeconds: 600 } });
    op = await operator(iam);
    server = await listen(iam.app, 0, "127.0.0.1");
  });
  afterAll(async () => {
    await server?.close();
    await database?.close();
  });

  const path = (orgId: string) => `/api/core/organizations/${orgId}/invitations`;
  async function post(to: string, token: string, body: unknown) {
    const response = await fetch(`${server.url}${to}`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${token}`, origin: iam.origin },
      body: JSON.stringify(body),
    });
    return { status: response.status, body: (await response.json()) as any };
  }
  const viaRoute = (orgId: string, owner: { token: string }, email: string) => post(path(orgId), owner.token, { email });
  const viaLibrary = (orgId: string, owner: { token: string }, email: string) => post("/api/auth/organization/invite-member", owner.token, { email, role: "member", organizationId: orgId });
  const pendingOf = async (orgId: string, email: string) =>
    rowsOf<{ id: string }>(await database.db.execute(sql`select id from iam.invitation where organization_id = ${orgId} and lower(email) = ${email.toLowerCase()} and status = 'pending'`));

  it("lets exactly one of twelve simultaneous invitations through IAM's route succeed; the others answer 409 INVITATION_EXISTS", async () => {
    const { orgId, owner } = await tenantOrg(iam, op);
    const email = uniqueEmail("race");
    const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => viaRoute(orgId, owner, i % 2 === 0 ? email : email.toUpperCase())));
    const made = answers.filter((a) => a.status === 201);
    expect(made, JSON.stringify(answers.map((a) => a.status))).toHaveLength(1);
    for (const refused of answers.filter((a) => a.status !== 201)) {
      expect(refused.status).toBe(409);
      expect(refused.body.error).toMatchObject({ code: "INVITATION_EXISTS", message: `${email} has a pending invitation already (${made[0]!.body.id})` });
    }
    expect(await pendingOf(orgId, email)).toEqual([{ id: made[0]!.body.id }]);
  });

  it("lets exactly one succeed when IAM's route and the library's invite-member race; the library's others answer its own refusal of a second invitation", async () => {
    const { orgId, owner } = await tenantOrg(iam, op);
    const email = uniqueEmail("mixed");
    const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => (i % 2 === 0 ? viaRoute(orgId, owner, email) : viaLibrary(orgId, owner, email))));
    const made = answers.filter((a) => a.status === 200 || a.status === 201);
    expect(made, JSON.stringify(answers.map((a) => a.status))).toHaveLength(1);
    // what the library answers a second invitation made after the first, for comparison
    const later = await viaLibrary(orgId, owner, email);
    expect(later.status).toBe(400);
    answers.forEach((answer, i) => {
      if (answer === made[0]) return;
      if (i % 2 === 0) expect(answer).toMatchObject({ status: 409, body: { error: { code: "INVITATION_EXISTS" } } });
      else expect(answer).toEqual(later);
    });
    expect(await pendingOf(orgId, email)).toHaveLength(1);
  });

  it("lets exactly one of twelve simultaneous library invitations succeed", async () => {
    const { orgId, owner } = await tenantOrg(iam, op);
    const email = uniqueEmail("library");
    const answers = await Promise.all(Array.from({ length: 12 }, () => viaLibrary(orgId, owner, email)));
    expect(answers.filter((a) => a.status === 200), JSON.stringify(answers.map((a) => a.status))).toHaveLength(1);
    expect(answers.filter((a) => a.status !== 200).map((a) => a.body.code)).toEqual(Array(11).fill("USER_IS_ALREADY_INVITED_TO_THIS_ORGANIZATION"));
    expect(await pendingOf(orgId, email)).toHaveLength(1);
  });

  it("invites an address again once its invitation lapsed, on IAM's route and on the library's, the lapsed one shown as expired", async () => {
    const { orgId, owner } = await tenantOrg(iam, op);
    const email = uniqueEmail("lapsed");
    const first = await viaRoute(orgId, owner, email);
    expect(first.status).toBe(201);
    iam.clock.advance((iam.config.invitationSeconds + 1) * 1000);
    const again = await viaRoute(orgId, owner, email);
    expect(again.status).toBe(201);
    const listed = (await call(iam, "GET", `${path(orgId)}?limit=100`, { token: owner.token })).body.data;
    expect(listed.find((i: { id: string }) => i.id === first.body.id).status).toBe("expired");
    // the library reads the wall clock for its invitations' lapse: this one lapsed an hour ago
    await database.db.execute(sql`update iam.invitation set expires_at = now() - interval '1 hour' where id = ${again.body.id}`);
    const byLibrary = await viaLibrary(orgId, owner, email);
    expect(byLibrary.status, JSON.stringify(byLibrary.body)).toBe(200);
    expect(await pendingOf(orgId, email)).toEqual([{ id: byLibrary.body.id }]);
  });
});

/**
 * The migration that adds the index (0007) meets a database where the race already left two
 * pending invitations of one address, or one in another letter case: it keeps the one that lasts
 * longest and cancels the others, rather than failing.
 */
describe.each(testDatabases())("the pending invitation index migrating a database with duplicates on $name", ({ open }) => {
  let database: DatabaseHandle;
  let before: string;
  beforeAll(async () => {
    database = await open();
    // the committed migrations without the index's: the database as the last release left it
    before = mkdtempSync(join(tmpdir(), "iam-migrations-"));
    cpSync(migrationsFolder, before, { recursive: true });
    const journalPath = join(before, "meta", "_journal.json");
    const journal = JSON.parse(readFileSync(journalPath, "utf8")) as { entries: { tag: string }[] };
    const index = journal.entries.findIndex((e) => e.tag.includes("security_invariants"));
    expect(index).toBeGreaterThan(0);
    journal.entries = journal.entries.slice(0, index);
    writeFileSync(journalPath, JSON.stringify(journal));
    await applyMigrations(database.db, "iam", before);
  });
  afterAll(async () => {
    rmSync(before, { recursive: true, force: true });
    await database?.close();
  });

  it("keeps the pending invitation that lasts longest of each address and cancels the others; the rest is untouched", async () => {
    const at = (days: number) => new Date(Date.UTC(2026, 10, 1) + days * 86_400_000).toISOString();
    await database.db.execute(sql`insert into iam.user (id, name, email, email_verified, created_at, updated_at) values ('u1', 'Owner', 'owner@example.com', true, now(), now())`);
    await database.db.execute(sql`insert into iam.organization (id, name, slug, created_at) values ('o1', 'One', 'one', now()), ('o2', 'Two', 'two', now())`);
    const rows: [string, string, string, string, number, number][] = [
      // id, organization, email, status, created (day), expires (day)
      ["older", "o1", "ada@example.com", "pending", 0, 7],
      ["newer", "o1", "Ada@Example.com", "pending", 1, 8],
      ["oldest", "o1", "ada@example.com", "pending", -1, 6],
      ["accepted", "o1", "ada@example.com", "accepted", -5, 2],
      ["elsewhere", "o2", "ada@example.com", "pending", 0, 7],
      ["alone", "o1", "bob@example.com", "pending", 0, 7],
    ];
    for (const [id, org, email, status, created, expires] of rows) {
      await database.db.execute(
        sql`insert into iam.invitation (id, organization_id, email, role, status, expires_at, created_at, inviter_id) values (${id}, ${org}, ${email}, 'member', ${status}, ${at(expires)}, ${at(created)}, 'u1')`,
      );
    }
    expect(await applyMigrations(database.db, "iam", migrationsFolder)).toBe(1);
    const after = rowsOf<{ id: string; status: string }>(await database.db.execute(sql`select id, status from iam.invitation order by id`));
    expect(Object.fromEntries(after.map((r) => [r.id, r.status]))).toEqual({
      accepted: "accepted",
      alone: "pending",
      elsewhere: "pending",
      newer: "pending",
      older: "canceled",
      oldest: "canceled",
    });
    // and from now on the index holds: another pending invitation of Ada to One is refused
    await expect(
      database.db.execute(
        sql`insert into iam.invitation (id, organization_id, email, role, status, expires_at, created_at, inviter_id) values ('late', 'o1', 'ADA@example.com', 'member', 'pending', ${at(9)}, ${at(2)}, 'u1')`,
      ),
    ).rejects.toThrow();
  });
});
