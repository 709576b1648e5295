import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "@core/kit";
import { testDatabases, type DatabaseHandle } from "@core/storage";
import { AuditLog } from "../src/audit.js";
import { call, createIam, failingFields, joinOrg, nowSeconds, operator, PASSWORD, serviceToken, signIn, signUp, staffedOrg, tenantOrg, uniqueEmail, type Iam, iamWithOperator, type Operator } from "./support/harness.js";

const EVENT_KEYS = ["action", "actorId", "actorType", "at", "id", "ip", "metadata", "orgId", "outcome", "requestId", "targetId", "targetType", "userAgent"];

interface AuditEvent {
  id: string;
  at: number;
  action: string;
  outcome: string;
  actorId: string | null;
  orgId: string | null;
  targetId: string | null;
}

describe.each(testDatabases())("audit on $name", ({ open }) => {
  let database: DatabaseHandle;
  let iam: Iam;
  let op: Operator;
  let service: string;
  beforeAll(async () => ({ database, iam, op, service } = await iamWithOperator(open)));
  afterAll(() => database?.close());

  const read = (reader: { token: string }, query = "") => call(iam, "GET", `/api/audit/events${query}`, { token: reader.token });

  /** The operator's view of events, filtered. */
  async function eventsWhere(filter: Record<string, string>) {
    const r = await read(op, `?limit=100&${new URLSearchParams(filter)}`);
    expect(r.status).toBe(200);
    return r.body.data as (AuditEvent & Record<string, unknown>)[];
  }

  describe("events recorded", () => {
    it("records a successful sign-in in the AuditEvent shape, with the user, address and request id", async () => {
      const ada = await signUp(iam);
      const r = await call(iam, "POST", "/api/auth/sign-in/email", {
        headers: { origin: iam.origin, "x-request-id": "req-sign-in-1", "user-agent": "audit-test/1.0" },
        body: { email: ada.email, password: PASSWORD },
      });
      expect(r.status).toBe(200);
      const [event] = await eventsWhere({ action: "auth.sign_in", actorId: ada.userId });
      expect(Object.keys(event!).sort()).toEqual(EVENT_KEYS);
      expect(event).toEqual({
        id: expect.any(String),
        at: nowSeconds(iam),
        action: "auth.sign_in",
        outcome: "success",
        actorType: "user",
        actorId: ada.userId,
        orgId: null,
        targetType: "email",
        targetId: ada.email,
        ip: "127.0.0.1",
        userAgent: "audit-test/1.0",
        requestId: "req-sign-in-1",
        metadata: { path: "/sign-in/email" },
      });
    });

    it("records a sign-in with a wrong password as a failure against the email, with the library's code", async () => {
      const ada = await signUp(iam);
      await call(iam, "POST", "/api/auth/sign-in/email", { headers: { origin: iam.origin }, body: { email: ada.email, password: "wrong-password" } });
      const failures = (await eventsWhere({ action: "auth.sign_in" })).filter((e) => e.targetId === ada.email && e.outcome === "failure");
      expect(failures).toHaveLength(1);
      expect(failures[0]).toMatchObject({ actorType: "anonymous", actorId: null, metadata: { code: "INVALID_EMAIL_OR_PASSWORD", status: 401 } });
    });

    it("records sign-up and sign-out with the user as actor", async () => {
      const ada = await signUp(iam);
      expect(await eventsWhere({ action: "auth.sign_up", actorId: ada.userId })).toHaveLength(1);
      const r = await call(iam, "POST", "/api/auth/sign-out", { cookie: ada.cookie });
      const [out] = await eventsWhere({ action: "auth.sign_out", actorId: ada.userId });
      // the request id IAM made up for the request, as it answered it
      expect(out).toMatchObject({ outcome: "success", actorType: "user", actorId: ada.userId, requestId: r.headers.get("x-request-id") });
      expect(out!.requestId).toEqual(expect.any(String));
    });

    it("records the revocation of a session", async () => {
      const ada = await signUp(iam);
      const laptop = await signIn(iam, ada);
      const id = (await call(iam, "GET", "/api/core/session", { token: laptop.token })).body.session.id;
      await call(iam, "DELETE", `/api/sessions/${id}`, { token: ada.token });
      const [event] = await eventsWhere({ action: "session.revoke", actorId: ada.userId });
      expect(event).toMatchObject({ outcome: "success", targetType: "session", targetId: id });
    });

    it("records role mapping changes in the organization", async () => {
      const { orgId, owner } = await tenantOrg(iam, op);
      await call(iam, "POST", "/api/core/roles", { token: owner.token, body: { orgId, role: "member", permissions: ["platform:read"] } });
      await call(iam, "DELETE", `/api/core/roles/${orgId}/member`, { token: owner.token });
      const events = await eventsWhere({ orgId });
      expect(events.find((e) => e.action === "role.upsert")).toMatchObject({
        actorId: owner.userId,
        targetType: "role",
        targetId: "member",
        metadata: { permissions: ["platform:read"] },
      });
      expect(events.find((e) => e.action === "role.delete")).toMatchObject({ actorId: owner.userId, orgId, targetId: "member" });
    });

    it("records grants and denials given and removed", async () => {
      const { orgId, owner } = await tenantOrg(iam, op);
      const member = await joinOrg(iam, orgId, owner);
      const g = await call(iam, "POST", "/api/core/grants", {
        token: owner.token,
        body: { userId: member.userId, orgId, permission: "apikeys:manage", granted: false, grantedBy: owner.userId },
      });
      await call(iam, "DELETE", `/api/core/grants/${g.body.id}`, { token: owner.token });
      const events = await eventsWhere({ orgId });
      expect(events.find((e) => e.action === "grant.create")).toMatchObject({
        actorId: owner.userId,
        targetType: "user",
        targetId: member.userId,
        metadata: { permission: "apikeys:manage", granted: false, grantId: g.body.id },
      });
      expect(events.find((e) => e.action === "grant.delete")).toMatchObject({ targetId: member.userId, metadata: { grantId: g.body.id } });
    });

    it("records invitations made and revoked", async () => {
      const { orgId, owner } = await tenantOrg(iam, op);
      const email = uniqueEmail("invited");
      const inv = await call(iam, "POST", `/api/core/organizations/${orgId}/invitations`, { token: owner.token, body: { email, role: "admin" } });
      await call(iam, "DELETE", `/api/core/organizations/${orgId}/invitations/${inv.body.id}`, { token: owner.token });
      const events = await eventsWhere({ orgId });
      expect(events.find((e) => e.action === "invitation.create")).toMatchObject({ targetId: inv.body.id, metadata: { email, role: "admin" } });
      expect(events.find((e) => e.action === "invitation.revoke")).toMatchObject({ actorId: owner.userId, targetId: inv.body.id });
    });

    it("records service tokens issued and refused", async () => {
      const local = await createIam(database, { serviceCredentials: new Map([["audit-probe", "audit-probe-secret-0123456789"]]) });
      await serviceToken(local, "audit-probe", "audit-probe-secret-0123456789", "billing");
      const basic = Buffer.from("audit-probe:wrong").toString("base64");
      await call(local, "POST", "/api/core/service-token", { headers: { authorization: `Basic ${basic}` }, body: { serviceId: "audit-probe", targetService: "iam" } });
      const events = (await eventsWhere({ action: "service_token.issue", actorId: "audit-probe" })).sort((a, b) => a.outcome.localeCompare(b.outcome));
      expect(events).toHaveLength(2);
      expect(events[0]).toMatchObject({ outcome: "failure", actorId: "audit-probe", targetId: "iam", metadata: { reason: "bad credentials" } });
      expect(events[1]).toMatchObject({ outcome: "success", actorType: "service", actorId: "audit-probe", targetType: "service", targetId: "billing" });
    });

    it("records a failed API key validation against the calling service", async () => {
      const before = await eventsWhere({ action: "apikey.validate" });
      const r = await call(iam, "POST", "/api/core/apikey/validate", { token: service, body: { key: "core_not-a-key" } });
      expect(r.body.valid).toBe(false);
      const after = await eventsWhere({ action: "apikey.validate" });
      expect(after.length).toBe(before.length + 1);
      expect(after.find((e) => !before.some((b) => b.id === e.id))).toMatchObject({
        outcome: "failure",
        actorType: "service",
        actorId: "platform-registry",
      });
    });

    it("records a platform status change that the registry could not make", async () => {
      const platformId = `plt_audit${Date.now()}`;
      const r = await call(iam, "POST", "/internal/platform-status", { token: op.token, body: { platformId, status: "suspended" } });
      expect(r.status).toBe(503);
      const [event] = await eventsWhere({ action: "platform.status" }).then((all) => all.filter((e) => e.targetId === platformId));
      expect(event).toMatchObject({ outcome: "failure", actorId: op.userId, targetType: "platform", metadata: { status: "suspended" } });
    });
  });

  describe("what events say and keep", () => {
    it("names the actor and organization of an organization action made with a bearer token", async () => {
      const { orgId, owner } = await tenantOrg(iam, op);
      const member = await joinOrg(iam, orgId, owner, "member");
      const r = await call(iam, "POST", "/api/auth/organization/set-active", { token: member.token, body: { organizationId: orgId } });
      expect(r.status).toBe(200);
      const [event] = await eventsWhere({ action: "organization.library_action", actorId: member.userId });
      expect(event).toMatchObject({ actorType: "user", actorId: member.userId, orgId, outcome: "success", metadata: { path: "/organization/set-active" } });
    });

    it("keeps no device user code: the events name the request instead", async () => {
      const started = await call(iam, "POST", "/oauth/device/code", { body: { client_id: "core-cli" } });
      const ada = await signUp(iam);
      expect((await call(iam, "POST", "/oauth/device/authorize", { token: ada.token, body: { user_code: started.body.user_code } })).status).toBe(200);
      const code = started.body.user_code as string;
      const events = [...(await eventsWhere({ action: "device.start" })).slice(0, 1), ...(await eventsWhere({ action: "device.approve", actorId: ada.userId }))];
      expect(events).toHaveLength(2);
      for (const event of events) {
        expect(JSON.stringify(event)).not.toContain(code);
        expect(JSON.stringify(event)).not.toContain(code.replace("-", ""));
        expect(event).toMatchObject({ targetType: "device_code", targetId: expect.stringMatching(/^dvc_/) });
      }
    });

    it("logs a failed audit write without the statement's parameters (emails, addresses)", async () => {
      const lines: string[] = [];
      const logger = createLogger("iam", "info", { write: (line: string) => void lines.push(line) });
      const log = new AuditLog(database.db, iam.clock, logger);
      // jsonb cannot hold U+0000: the insert fails inside the database, with every parameter in the driver's message
      await log.record({ action: "auth.sign_in", outcome: "failure", actorType: "anonymous", targetType: "email", targetId: "secret-ada@example.com", ip: "203.0.113.77", metadata: { x: "\u0000" } });
      const text = lines.join("");
      expect(text).toContain("audit write failed");
      expect(text).not.toContain("secret-ada@example.com");
      expect(text).not.toContain("203.0.113.77");
    });
  });

  describe("GET /api/audit/events", () => {
    it("filters by organization, actor and action", async () => {
      const { orgId, owner } = await tenantOrg(iam, op);
      const other = await tenantOrg(iam, op);
      await call(iam, "POST", "/api/core/roles", { token: other.owner.token, body: { orgId: other.orgId, role: "member", permissions: [] } });
      await call(iam, "POST", "/api/core/roles", { token: owner.token, body: { orgId, role: "member", permissions: [] } });
      const inOrg = await eventsWhere({ orgId });
      expect(inOrg.length).toBeGreaterThan(0);
      expect(inOrg.every((e) => e.orgId === orgId)).toBe(true);
      const byOwner = await eventsWhere({ actorId: owner.userId });
      expect(byOwner.length).toBeGreaterThan(0);
      expect(byOwner.every((e) => e.actorId === owner.userId)).toBe(true);
      const upserts = await eventsWhere({ action: "role.upsert", orgId });
      expect(upserts).toHaveLength(1);
    });

    it("filters by time: since and until are inclusive Unix seconds", async () => {
      const { orgId, owner } = await tenantOrg(iam, op);
      const times: number[] = [];
      for (const role of ["a", "b", "c"]) {
        iam.clock.advance(10_000);
        times.push(nowSeconds(iam));
        await call(iam, "POST", "/api/core/roles", { token: owner.token, body: { orgId, role, permissions: [] } });
      }
      const roles = async (filter: Record<string, string>) =>
        (await eventsWhere({ orgId, action: "role.upsert", ...filter })).map((e) => e.targetId);
      expect(await roles({ since: String(times[1]) })).toEqual(["c", "b"]);
      expect(await roles({ until: String(times[1]) })).toEqual(["b", "a"]);
      expect(await roles({ since: String(times[1]), until: String(times[1]) })).toEqual(["b"]);
      expect(await roles({ since: String(times[2]! + 1) })).toEqual([]);
      expect(await roles({ until: String(times[0]! - 1) })).toEqual([]);
    });

    it("pages newest first with a cursor, without gaps or duplicates, cursor null on the last page", async () => {
      const { orgId, owner } = await tenantOrg(iam, op);
      for (let i = 0; i < 7; i++) {
        // some events share a second, so pages must break ties
        if (i % 3 === 0) iam.clock.advance(1000);
        await call(iam, "POST", "/api/core/roles", { token: owner.token, body: { orgId, role: `r${i}`, permissions: [] } });
      }
      const all = await eventsWhere({ orgId });
      expect(all.length).toBeGreaterThanOrEqual(8);
      const ats = all.map((e) => e.at);
      expect(ats).toEqual([...ats].sort((a, b) => b - a));
      // newest first, within one second too: the last written comes first
      expect(all.slice(0, 7).map((e) => e.targetId)).toEqual(["r6", "r5", "r4", "r3", "r2", "r1", "r0"]);

      const seen: string[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const r = await read(op, `?orgId=${orgId}&limit=3${cursor ? `&cursor=${cursor}` : ""}`);
        expect(r.status).toBe(200);
        expect(Object.keys(r.body).sort()).toEqual(["cursor", "data"]);
        seen.push(...r.body.data.map((e: AuditEvent) => e.id));
        cursor = r.body.cursor;
        pages++;
      } while (cursor !== null && pages < 50);
      expect(seen).toEqual(all.map((e) => e.id));
      expect(pages).toBe(Math.ceil(all.length / 3));
    });

    it("answers 50 events by default and up to 100 when asked, and 1 with limit 1", async () => {
      const { orgId, owner } = await tenantOrg(iam, op);
      for (let i = 0; i < 51; i++) {
        await call(iam, "POST", "/api/core/roles", { token: owner.token, body: { orgId, role: "member", permissions: i % 2 ? [] : ["platform:read"] } });
      }
      const first = await read(op, `?orgId=${orgId}`);
      expect(first.body.data).toHaveLength(50);
      expect(first.body.cursor).toEqual(expect.any(String));
      expect((await read(op, `?orgId=${orgId}&limit=100`)).body).toMatchObject({ cursor: null });
      expect((await read(op, `?orgId=${orgId}&limit=100`)).body.data.length).toBeGreaterThanOrEqual(52);
      const one = await read(op, `?orgId=${orgId}&limit=1`);
      expect(one.body.data).toHaveLength(1);
      expect(one.body.cursor).toEqual(expect.any(String));
    });

    it.each([
      ["limit=0", "limit"],
      ["limit=101", "limit"],
      ["limit=2.5", "limit"],
      ["since=-1", "since"],
      ["since=yesterday", "since"],
      ["until=1.5", "until"],
      ["until=100000000000", "until"],
      ["action=", "action"],
      ["orgId=", "orgId"],
      ["since=", "since"],
      ["until=", "until"],
      ["until=%20", "until"],
    ])("answers 400 VALIDATION_ERROR for %s", async (query, field) => {
      const r = await read(op, `?${query}`);
      expect(r.status).toBe(400);
      expect(r.body.error.code).toBe("VALIDATION_ERROR");
      expect(failingFields(r.body)).toContain(field);
    });

    it("answers 400 for a cursor it did not make", async () => {
      expect((await read(op, "?cursor=forged")).status).toBe(400);
    });

    const edited = (position: string) => Buffer.from(position).toString("base64url");
    it.each([
      ["a key that is not a number", edited('{"k":"abc","id":1}')],
      ["a key of 1e300", edited('{"k":1e300,"id":1}')],
      ["a key of 2^63-1", edited('{"k":9223372036854775807,"id":1}')],
      ["a tie-breaker of 2^63-1", edited('{"k":1,"id":9223372036854775807}')],
      ["a tie-breaker holding U+0000", edited('{"k":1,"id":"a\\u0000"}')],
      ["a date where seconds belong", edited('{"k":"2026-01-01T00:00:00.000Z","id":1}')],
    ])("answers 400 BAD_REQUEST, never 500, for an edited cursor: %s", async (_, cursor) => {
      const r = await read(op, `?cursor=${cursor}`);
      expect(r.status).toBe(400);
      expect(r.body.error).toMatchObject({ code: "BAD_REQUEST", details: { path: "cursor" } });
    });

    it("shows an org admin their organization's events and nothing else", async () => {
      const { orgId, owner, admin } = await staffedOrg(iam, op);
      await call(iam, "POST", "/api/core/roles", { token: owner.token, body: { orgId, role: "member", permissions: [] } });
      const own = await read(admin);
      expect(own.status).toBe(200);
      expect(own.body.data.length).toBeGreaterThan(0);
      expect(own.body.data.every((e: AuditEvent) => e.orgId === orgId)).toBe(true);
      expect((await read(admin, `?orgId=${orgId}`)).body.data).toEqual(own.body.data);
      expect((await read(owner)).body.data).toEqual(own.body.data);
    });

    it("refuses an org admin another organization's events with 403", async () => {
      const { admin } = await staffedOrg(iam, op);
      const other = await tenantOrg(iam, op);
      const r = await read(admin, `?orgId=${other.orgId}`);
      expect(r.status).toBe(403);
      expect((await read(admin, `?orgId=${op.orgId}`)).status).toBe(403);
    });

    it("refuses a member without audit:read with 403", async () => {
      const { member, orgId } = await staffedOrg(iam, op);
      expect((await read(member)).status).toBe(403);
      expect((await read(member, `?orgId=${orgId}`)).status).toBe(403);
    });

    it("refuses an admin whose audit:read was denied with 403", async () => {
      const { orgId, owner, admin } = await staffedOrg(iam, op);
      await call(iam, "POST", "/api/core/grants", {
        token: owner.token,
        body: { userId: admin.userId, orgId, permission: "audit:read", granted: false, grantedBy: owner.userId },
      });
      expect((await read(admin)).status).toBe(403);
    });

    it("shows operators everything, events without an organization included", async () => {
      const ada = await signUp(iam);
      const { orgId } = await tenantOrg(iam, op);
      const [signUpEvent] = await eventsWhere({ actorId: ada.userId, action: "auth.sign_up" });
      expect(signUpEvent).toMatchObject({ orgId: null, actorId: ada.userId });
      expect((await eventsWhere({ orgId })).map((e) => e.action)).toContain("organization.create");
      // a plain member of the operator organization reads everything too (operators' members hold audit:read)
      const opMember = await joinOrg(iam, op.orgId, op);
      expect((await read(opMember, `?actorId=${ada.userId}`)).body.data.length).toBeGreaterThan(0);
    });

    it("refuses a request without a session with 401, and a service token or API key", async () => {
      expect((await call(iam, "GET", "/api/audit/events")).status).toBe(401);
      expect((await read({ token: "wrong" })).status).toBe(401);
      expect((await read({ token: service })).status).toBe(401);
      expect((await call(iam, "GET", "/api/audit/events", { headers: { "x-api-key": "core_some-key" } })).status).toBe(401);
    });
  });

  describe("GET /api/audit/events/{id}", () => {
    it("answers one event in the AuditEvent shape", async () => {
      const [listed] = (await read(op, "?limit=1")).body.data;
      const r = await call(iam, "GET", `/api/audit/events/${listed.id}`, { token: op.token });
      expect(r.status).toBe(200);
      expect(Object.keys(r.body).sort()).toEqual(EVENT_KEYS);
      expect(r.body).toEqual(listed);
    });

    it("answers an org admin their organization's events, and 404 for others'", async () => {
      const { orgId, owner, admin } = await staffedOrg(iam, op);
      await call(iam, "POST", "/api/core/roles", { token: owner.token, body: { orgId, role: "member", permissions: [] } });
      const [mine] = (await read(admin)).body.data;
      expect((await call(iam, "GET", `/api/audit/events/${mine.id}`, { token: admin.token })).status).toBe(200);
      const [withoutOrg] = await eventsWhere({ action: "auth.sign_up", actorId: admin.userId });
      expect((await call(iam, "GET", `/api/audit/events/${withoutOrg!.id}`, { token: admin.token })).status).toBe(404);
      const other = await tenantOrg(iam, op);
      const [theirs] = await eventsWhere({ orgId: other.orgId });
      expect((await call(iam, "GET", `/api/audit/events/${theirs!.id}`, { token: admin.token })).status).toBe(404);
    });

    it("answers 404 to a member without audit:read, and for an unknown event", async () => {
      const { orgId, member } = await staffedOrg(iam, op);
      const [event] = await eventsWhere({ orgId });
      expect((await call(iam, "GET", `/api/audit/events/${event!.id}`, { token: member.token })).status).toBe(404);
      expect((await call(iam, "GET", "/api/audit/events/aud_nosuchevent", { token: op.token })).status).toBe(404);
    });

    it("refuses a request without a session with 401", async () => {
      const [event] = (await read(op, "?limit=1")).body.data;
      expect((await call(iam, "GET", `/api/audit/events/${event.id}`)).status).toBe(401);
      expect((await call(iam, "GET", `/api/audit/events/${event.id}`, { token: service })).status).toBe(401);
    });
  });
});
