import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabases, type DatabaseHandle } from "@core/storage";
import { call, createApiKey, iamWithOperator, principalOf, signUp, tenantOrg, type Iam, type Operator, type SignedUp } from "./support/harness.js";
import { pollToken, refresh, startDeviceLogin } from "./support/device.js";

/** A person in several organizations: GET /api/core/memberships, set-active, and a CLI login that keeps its choice. */
describe.each(testDatabases())("memberships on $name", ({ open }) => {
  let database: DatabaseHandle;
  let iam: Iam;
  let op: Operator;
  let service: string;
  beforeAll(async () => ({ database, iam, op, service } = await iamWithOperator(open)));
  afterAll(() => database?.close());

  const memberships = (as: { token?: string; headers?: Record<string, string> }) => call(iam, "GET", "/api/core/memberships", as);
  const setActive = (who: { token: string }, slug: string) =>
    call(iam, "POST", "/api/auth/organization/set-active", { token: who.token, headers: { origin: iam.origin }, body: { organizationSlug: slug } });

  /** A person who owns two tenant organizations, made one after the other. */
  async function inTwo() {
    const ada = await signUp(iam);
    const first = await tenantOrg(iam, op, ada);
    iam.clock.advance(1000);
    const second = await tenantOrg(iam, op, ada);
    return { ada, first, second };
  }

  it("lists every organization with the role in it, the active one marked (the oldest until one is chosen)", async () => {
    const { ada, first, second } = await inTwo();
    const r = await memberships({ token: ada.token });
    expect(r.status).toBe(200);
    expect(r.body.data).toEqual([
      { orgId: first.orgId, name: `Tenant ${first.slug}`, slug: first.slug, orgType: "tenant", platformId: null, role: "owner", active: true, joinedAt: expect.any(Number) },
      { orgId: second.orgId, name: `Tenant ${second.slug}`, slug: second.slug, orgType: "tenant", platformId: null, role: "owner", active: false, joinedAt: expect.any(Number) },
    ]);
    expect((await principalOf(iam, ada)).orgId).toBe(first.orgId);
  });

  it("switches with set-active: the session acts in the chosen organization and the list says so", async () => {
    const { ada, second } = await inTwo();
    expect((await setActive(ada, second.slug)).status).toBe(200);
    expect((await principalOf(iam, ada)).orgId).toBe(second.orgId);
    const listed = (await memberships({ token: ada.token })).body.data;
    expect(listed.filter((m: { active: boolean }) => m.active).map((m: { slug: string }) => m.slug)).toEqual([second.slug]);
  });

  it("refuses to switch into an organization the person is not in, and the session stays where it was", async () => {
    const { ada, first } = await inTwo();
    const stranger = await tenantOrg(iam, op);
    const r = await setActive(ada, stranger.slug);
    expect(r.status).toBeGreaterThanOrEqual(400);
    expect(r.status).toBeLessThan(500);
    expect((await principalOf(iam, ada)).orgId).toBe(first.orgId);
  });

  it("puts the operator organization first, and an API key acts in its own organization", async () => {
    const listed = (await memberships({ token: op.token })).body.data;
    expect(listed[0]).toMatchObject({ slug: "core-operator", orgType: "core-operator", role: "owner", active: true });
    const { ada } = await inTwo();
    const { key } = await createApiKey(iam, ada);
    const byKey = await memberships({ headers: { "x-api-key": key } });
    expect(byKey.status).toBe(200);
    expect(byKey.body.data.map((m: { active: boolean }) => m.active)).toEqual([true, false]);
  });

  it("answers a person in no organization with an empty list; a service 403; no credential 401", async () => {
    const loner = await signUp(iam);
    expect((await memberships({ token: loner.token })).body).toEqual({ data: [] });
    const byService = await memberships({ token: service });
    expect(byService.status).toBe(403);
    expect(byService.body.error.code).toBe("FORBIDDEN");
    expect((await memberships({})).status).toBe(401);
  });

  describe("a CLI login keeps its choice across refreshes", () => {
    async function cliLogin(person: SignedUp) {
      const started = await startDeviceLogin(iam);
      await call(iam, "POST", "/oauth/device/authorize", { token: person.token, body: { user_code: started.user_code } });
      return (await pollToken(iam, started.device_code)).body as { access_token: string; refresh_token: string };
    }

    it("a refreshed session acts in the organization the login switched to", async () => {
      const { ada, first, second } = await inTwo();
      const tokens = await cliLogin(ada);
      expect((await principalOf(iam, { token: tokens.access_token })).orgId).toBe(first.orgId);
      expect((await setActive({ token: tokens.access_token }, second.slug)).status).toBe(200);
      const refreshed = await refresh(iam, tokens.refresh_token);
      expect(refreshed.status).toBe(200);
      expect((await principalOf(iam, { token: refreshed.body.access_token })).orgId).toBe(second.orgId);
      // and the one after it
      const again = await refresh(iam, refreshed.body.refresh_token);
      expect((await principalOf(iam, { token: again.body.access_token })).orgId).toBe(second.orgId);
      // the browser session the login was approved from made no choice
      expect((await principalOf(iam, ada)).orgId).toBe(first.orgId);
    });

    it("falls back to the default when the person left the chosen organization", async () => {
      const { ada, first, second } = await inTwo();
      const tokens = await cliLogin(ada);
      await setActive({ token: tokens.access_token }, second.slug);
      await database.db.execute(
        // out of the organization by the database's hand: the library keeps an organization's last owner
        sql`delete from iam.member where organization_id = ${second.orgId} and user_id = ${ada.userId}`,
      );
      const refreshed = await refresh(iam, tokens.refresh_token);
      expect((await principalOf(iam, { token: refreshed.body.access_token })).orgId).toBe(first.orgId);
    });
  });
});
