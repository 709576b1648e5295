import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabases, type DatabaseHandle } from "@core/storage";
import { call, failingFields, nowSeconds, principalOf, signUp, staffedOrg, tenantOrg, uniqueEmail, type Iam, iamWithOperator, type Operator } from "./support/harness.js";

const INVITATION_KEYS = ["createdAt", "email", "expiresAt", "id", "inviterId", "organizationId", "role", "status"];

interface Invitation {
  id: string;
  email: string;
  status: string;
  role: string;
}

describe.each(testDatabases())("invitations on $name", ({ open }) => {
  let database: DatabaseHandle;
  let iam: Iam;
  let op: Operator;
  let service: string;
  beforeAll(async () => ({ database, iam, op, service } = await iamWithOperator(open)));
  afterAll(() => database?.close());

  const path = (orgId: string) => `/api/core/organizations/${orgId}/invitations`;
  const invite = (orgId: string, as: { token: string }, body: Record<string, unknown>) => call(iam, "POST", path(orgId), { token: as.token, body });
  const list = (orgId: string, as: { token: string }, query = "") => call(iam, "GET", `${path(orgId)}${query}`, { token: as.token });
  const revoke = (orgId: string, as: { token: string }, id: string) => call(iam, "DELETE", `${path(orgId)}/${id}`, { token: as.token });

  describe("GET /api/core/organizations/{orgId}/invitations", () => {
    let crowded: Awaited<ReturnType<typeof tenantOrg>>;
    let all: string[];

    beforeAll(async () => {
      // 51 invitations, some sharing a creation time: pages must break ties by id
      crowded = await tenantOrg(iam, op);
      for (let i = 0; i < 51; i++) {
        if (i % 10 === 0) iam.clock.advance(1000);
        const r = await invite(crowded.orgId, crowded.owner, { email: uniqueEmail(`crowd${i}`) });
        if (r.status !== 201) throw new Error(`invitation ${i} refused: ${r.status}`);
      }
      all = (await list(crowded.orgId, crowded.owner, "?limit=100")).body.data.map((i: Invitation) => i.id);
    });

    async function pageThrough(limit: number) {
      const seen: string[] = [];
      let cursor = "";
      let pages = 0;
      do {
        const r = await list(crowded.orgId, crowded.owner, `?limit=${limit}${cursor ? `&cursor=${cursor}` : ""}`);
        expect(r.status).toBe(200);
        expect(r.body.data.length).toBeLessThanOrEqual(limit);
        seen.push(...r.body.data.map((i: Invitation) => i.id));
        cursor = r.body.cursor;
        pages++;
      } while (cursor !== "" && pages < 100);
      return { seen, pages };
    }

    it("answers { data, cursor } with 50 invitations by default, then the rest with cursor \"\"", async () => {
      const first = await list(crowded.orgId, crowded.owner);
      expect(first.status).toBe(200);
      expect(Object.keys(first.body).sort()).toEqual(["cursor", "data"]);
      expect(first.body.data).toHaveLength(50);
      expect(first.body.cursor).toEqual(expect.any(String));
      expect(first.body.cursor).not.toBe("");
      for (const i of first.body.data) expect(Object.keys(i).sort()).toEqual(INVITATION_KEYS);
      const rest = await list(crowded.orgId, crowded.owner, `?cursor=${first.body.cursor}`);
      expect(rest.body.data).toHaveLength(1);
      expect(rest.body.cursor).toBe("");
    });

    it("lists oldest first", async () => {
      const r = await list(crowded.orgId, crowded.owner, "?limit=100");
      const created = r.body.data.map((i: { createdAt: number }) => i.createdAt);
      expect(created).toEqual([...created].sort((a, b) => a - b));
      expect(new Set(created).size).toBeGreaterThan(1);
    });

    it("accepts limit 1 and limit 100", async () => {
      const one = await list(crowded.orgId, crowded.owner, "?limit=1");
      expect(one.body.data).toHaveLength(1);
      expect(one.body.cursor).not.toBe("");
      const hundred = await list(crowded.orgId, crowded.owner, "?limit=100");
      expect(hundred.body.data).toHaveLength(51);
      expect(hundred.body.cursor).toBe("");
    });

    it.each([1, 7, 50])("pages with limit %i through every invitation once, in order, without gaps", async (limit) => {
      const { seen, pages } = await pageThrough(limit);
      expect(seen).toEqual(all);
      expect(new Set(seen).size).toBe(51);
      expect(pages).toBe(Math.ceil(51 / limit));
    });

    it.each(["0", "101", "-1", "1.5", "ten"])("answers 400 VALIDATION_ERROR naming limit for limit=%s", async (limit) => {
      const r = await list(crowded.orgId, crowded.owner, `?limit=${limit}`);
      expect(r.status).toBe(400);
      expect(r.body.error.code).toBe("VALIDATION_ERROR");
      expect(failingFields(r.body)).toContain("limit");
    });

    it("answers 400 for a cursor it did not make", async () => {
      const r = await list(crowded.orgId, crowded.owner, "?cursor=not-a-cursor");
      expect(r.status).toBe(400);
    });

    const edited = (position: string) => Buffer.from(position).toString("base64url");
    it.each([
      ["a key that is not a date", edited('{"k":"yesterday","id":"x"}')],
      ["a date out of range", edited('{"k":"+275760-09-13T00:00:00.000Z","id":"x"}')],
      ["a number where a date belongs", edited('{"k":1e300,"id":"x"}')],
      ["an id holding U+0000", edited('{"k":"2026-01-01T00:00:00.000Z","id":"a\\u0000"}')],
    ])("answers 400 BAD_REQUEST, never 500, for an edited cursor: %s", async (_, cursor) => {
      const r = await list(crowded.orgId, crowded.owner, `?cursor=${cursor}`);
      expect(r.status).toBe(400);
      expect(r.body.error).toMatchObject({ code: "BAD_REQUEST", details: { path: "cursor" } });
    });

    it("answers an empty page with cursor \"\" for an organization without invitations", async () => {
      const { orgId, owner } = await tenantOrg(iam, op);
      expect((await list(orgId, owner)).body).toEqual({ data: [], cursor: "" });
    });

    it("shows only the organization's own invitations", async () => {
      const { orgId, owner } = await tenantOrg(iam, op);
      const mine = await invite(orgId, owner, { email: uniqueEmail() });
      const r = await list(orgId, owner);
      expect(r.body.data).toEqual([mine.body]);
    });

    it("lets admins, operators and services list", async () => {
      const { orgId, admin } = await staffedOrg(iam, op);
      for (const token of [admin.token, op.token, service]) expect((await list(orgId, { token })).status).toBe(200);
    });

    it("refuses a plain member and the owner of another organization with 403", async () => {
      const { orgId, member } = await staffedOrg(iam, op);
      expect((await list(orgId, member)).status).toBe(403);
      expect((await list(orgId, crowded.owner)).status).toBe(403);
    });

    it("refuses a request without credentials or with a wrong one with 401", async () => {
      expect((await call(iam, "GET", path(crowded.orgId))).status).toBe(401);
      expect((await list(crowded.orgId, { token: "wrong" })).status).toBe(401);
    });

    it("answers 404 for an unknown organization", async () => {
      expect((await list("no-such-org", op)).status).toBe(404);
    });
  });

  describe("POST /api/core/organizations/{orgId}/invitations", () => {
    it("creates a pending member invitation by default, answering the Invitation of spec §2.5", async () => {
      const { orgId, owner } = await tenantOrg(iam, op);
      const email = uniqueEmail("invitee");
      const r = await invite(orgId, owner, { email });
      expect(r.status).toBe(201);
      expect(Object.keys(r.body).sort()).toEqual(INVITATION_KEYS);
      expect(r.body).toEqual({
        id: expect.any(String),
        organizationId: orgId,
        email,
        role: "member",
        status: "pending",
        expiresAt: nowSeconds(iam) + iam.config.invitationSeconds,
        inviterId: owner.userId,
        createdAt: nowSeconds(iam),
      });
    });

    it("sends the invitee a mail naming the invitation", async () => {
      const { orgId, owner, slug } = await tenantOrg(iam, op);
      const email = uniqueEmail("mailed");
      const r = await invite(orgId, owner, { email });
      const mail = iam.mailer.sent.find((m) => m.to === email);
      expect(mail).toBeDefined();
      expect(mail!.subject).toBe(`${owner.email.split("@")[0]} invites you to Tenant ${slug} on Core`);
      // a link to the invitation's page, who invites with which role, and no JSON to post by hand
      expect(mail!.text).toContain(`${iam.config.iamUrl}/invitations/${r.body.id}\n`);
      expect(mail!.text).toContain(`(${owner.email}) invites you to join Tenant ${slug} on Core as a member.`);
      expect(mail!.text).not.toContain("POST");
      expect(mail!.text).not.toContain("invitationId");
    });

    it("stores the email in lower case", async () => {
      const { orgId, owner } = await tenantOrg(iam, op);
      const email = uniqueEmail("MixedCase");
      const r = await invite(orgId, owner, { email: email.toUpperCase() });
      expect(r.body.email).toBe(email.toLowerCase());
    });

    it("makes an invitation the invitee can accept, joining with the invited role", async () => {
      const { orgId, owner } = await tenantOrg(iam, op);
      const bob = await signUp(iam);
      const r = await invite(orgId, owner, { email: bob.email, role: "admin" });
      const accepted = await call(iam, "POST", "/api/auth/organization/accept-invitation", { token: bob.token, headers: { origin: iam.origin }, body: { invitationId: r.body.id } });
      expect(accepted.status).toBe(200);
      expect(await principalOf(iam, bob)).toMatchObject({ orgId, role: "admin" });
    });

    it("lets owners and operators invite owners, and refuses admins with 403", async () => {
      const { orgId, owner, admin } = await staffedOrg(iam, op);
      expect((await invite(orgId, owner, { email: uniqueEmail(), role: "owner" })).body.role).toBe("owner");
      expect((await invite(orgId, op, { email: uniqueEmail(), role: "owner" })).status).toBe(201);
      const r = await invite(orgId, admin, { email: uniqueEmail(), role: "owner" });
      expect(r.status).toBe(403);
      expect((await invite(orgId, admin, { email: uniqueEmail(), role: "admin" })).status).toBe(201);
    });

    it("takes inviterId when it is the caller, and refuses anyone else's with 403", async () => {
      const { orgId, owner, admin } = await staffedOrg(iam, op);
      expect((await invite(orgId, owner, { email: uniqueEmail(), inviterId: owner.userId })).status).toBe(201);
      const r = await invite(orgId, owner, { email: uniqueEmail(), inviterId: admin.userId });
      expect(r.status).toBe(403);
    });

    it("needs a service to name the inviting user: 400 without inviterId, 404 for an unknown one", async () => {
      const { orgId, owner } = await tenantOrg(iam, op);
      const without = await invite(orgId, { token: service }, { email: uniqueEmail() });
      expect(without.status).toBe(400);
      expect(without.body.error.code).toBe("VALIDATION_ERROR");
      expect(failingFields(without.body)).toContain("inviterId");
      expect((await invite(orgId, { token: service }, { email: uniqueEmail(), inviterId: "no-such-user" })).status).toBe(404);
      const named = await invite(orgId, { token: service }, { email: uniqueEmail(), inviterId: owner.userId });
      expect(named.status).toBe(201);
      expect(named.body.inviterId).toBe(owner.userId);
    });

    it("answers 409 for a second pending invitation of one address, in any letter case", async () => {
      const { orgId, owner } = await tenantOrg(iam, op);
      const email = uniqueEmail("twice");
      expect((await invite(orgId, owner, { email })).status).toBe(201);
      const r = await invite(orgId, owner, { email: email.toUpperCase() });
      expect(r.status).toBe(409);
      expect(r.body.error.code).toBe("INVITATION_EXISTS");
    });

    it("invites an address again once its invitation was revoked", async () => {
      const { orgId, owner } = await tenantOrg(iam, op);
      const email = uniqueEmail("again");
      const first = await invite(orgId, owner, { email });
      await revoke(orgId, owner, first.body.id);
      expect((await invite(orgId, owner, { email })).status).toBe(201);
    });

    it("answers 409 for someone who is a member already", async () => {
      const { orgId, owner, member } = await staffedOrg(iam, op);
      const r = await invite(orgId, owner, { email: member.email });
      expect(r.status).toBe(409);
      expect(r.body.error.code).toBe("ALREADY_MEMBER");
    });

    it("refuses a plain member and the owner of another organization with 403", async () => {
      const { orgId, member } = await staffedOrg(iam, op);
      const other = await tenantOrg(iam, op);
      expect((await invite(orgId, member, { email: uniqueEmail() })).status).toBe(403);
      expect((await invite(orgId, other.owner, { email: uniqueEmail() })).status).toBe(403);
      expect((await list(orgId, op)).body.data).toHaveLength(2);
    });

    it("refuses a request without credentials or with a wrong one with 401", async () => {
      const { orgId } = await tenantOrg(iam, op);
      expect((await call(iam, "POST", path(orgId), { body: { email: uniqueEmail() } })).status).toBe(401);
      expect((await invite(orgId, { token: "wrong" }, { email: uniqueEmail() })).status).toBe(401);
    });

    it("answers 404 for an unknown organization", async () => {
      expect((await invite("no-such-org", op, { email: uniqueEmail() })).status).toBe(404);
    });

    it.each([
      ["email missing", { email: undefined }, "email"],
      ["email without @", { email: "ada.example.com" }, "email"],
      ["email without a domain", { email: "ada@" }, "email"],
      ["email of 321 characters", { email: `${"a".repeat(309)}@example.com` }, "email"],
      ["an unknown role", { role: "superuser" }, "role"],
      ["inviterId empty", { inviterId: "" }, "inviterId"],
    ])("answers 400 VALIDATION_ERROR for %s", async (_label, change, field) => {
      const r = await invite(op.orgId, op, { email: uniqueEmail(), ...change });
      expect(r.status).toBe(400);
      expect(r.body.error.code).toBe("VALIDATION_ERROR");
      expect(failingFields(r.body)).toContain(field);
    });
  });

  describe("DELETE /api/core/organizations/{orgId}/invitations/{invitationId}", () => {
    it("answers 400 VALIDATION_ERROR naming invitationId for an id over 128 characters", async () => {
      const r = await revoke(op.orgId, op, "i".repeat(129));
      expect(r.status).toBe(400);
      expect(failingFields(r.body)).toContain("invitationId");
    });

    it("revokes a pending invitation, answering { id }; it shows as canceled", async () => {
      const { orgId, owner } = await tenantOrg(iam, op);
      const created = await invite(orgId, owner, { email: uniqueEmail() });
      const r = await revoke(orgId, owner, created.body.id);
      expect(r.status).toBe(200);
      expect(r.body).toEqual({ id: created.body.id });
      const after = await list(orgId, owner);
      expect(after.body.data).toEqual([{ ...created.body, status: "canceled" }]);
    });

    it("leaves a revoked invitation unusable", async () => {
      const { orgId, owner } = await tenantOrg(iam, op);
      const bob = await signUp(iam);
      const created = await invite(orgId, owner, { email: bob.email });
      await revoke(orgId, owner, created.body.id);
      const accepted = await call(iam, "POST", "/api/auth/organization/accept-invitation", {
        token: bob.token,
        headers: { origin: iam.origin },
        body: { invitationId: created.body.id },
      });
      expect(accepted.status).toBe(400);
      expect((await principalOf(iam, bob)).orgId).toBeNull();
    });

    it("answers 409 when revoking again, and for an invitation accepted already", async () => {
      const { orgId, owner } = await tenantOrg(iam, op);
      const created = await invite(orgId, owner, { email: uniqueEmail() });
      expect((await revoke(orgId, owner, created.body.id)).status).toBe(200);
      const again = await revoke(orgId, owner, created.body.id);
      expect(again.status).toBe(409);
      expect(again.body.error.code).toBe("INVITATION_NOT_PENDING");

      const bob = await signUp(iam);
      const accepted = await invite(orgId, owner, { email: bob.email });
      await call(iam, "POST", "/api/auth/organization/accept-invitation", { token: bob.token, headers: { origin: iam.origin }, body: { invitationId: accepted.body.id } });
      expect((await revoke(orgId, owner, accepted.body.id)).status).toBe(409);
    });

    it("answers 404 for an unknown invitation and for another organization's", async () => {
      const { orgId, owner } = await tenantOrg(iam, op);
      const other = await tenantOrg(iam, op);
      const theirs = await invite(other.orgId, other.owner, { email: uniqueEmail() });
      expect((await revoke(orgId, owner, "no-such-invitation")).status).toBe(404);
      expect((await revoke(orgId, owner, theirs.body.id)).status).toBe(404);
      expect((await list(other.orgId, other.owner)).body.data[0].status).toBe("pending");
    });

    it("lets admins, operators and services revoke", async () => {
      const { orgId, owner, admin } = await staffedOrg(iam, op);
      for (const token of [admin.token, op.token, service]) {
        const created = await invite(orgId, owner, { email: uniqueEmail() });
        expect((await revoke(orgId, { token }, created.body.id)).status).toBe(200);
      }
    });

    it("refuses a plain member and the owner of another organization with 403, leaving it pending", async () => {
      const { orgId, owner, member } = await staffedOrg(iam, op);
      const other = await tenantOrg(iam, op);
      const created = await invite(orgId, owner, { email: uniqueEmail() });
      expect((await revoke(orgId, member, created.body.id)).status).toBe(403);
      expect((await revoke(orgId, other.owner, created.body.id)).status).toBe(403);
      const still = (await list(orgId, owner)).body.data.find((i: Invitation) => i.id === created.body.id);
      expect(still.status).toBe("pending");
    });

    it("refuses a request without credentials or with a wrong one with 401", async () => {
      const { orgId, owner } = await tenantOrg(iam, op);
      const created = await invite(orgId, owner, { email: uniqueEmail() });
      expect((await call(iam, "DELETE", `${path(orgId)}/${created.body.id}`)).status).toBe(401);
      expect((await revoke(orgId, { token: "wrong" }, created.body.id)).status).toBe(401);
    });
  });
});
