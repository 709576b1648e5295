import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabases, type DatabaseHandle } from "@core/storage";
import { pendingInvitationsFor } from "../src/invitation-view.js";
import { call, iamWithOperator, signUp, tenantOrg, uniqueEmail, type Iam, type Operator, type SignedUp } from "./support/harness.js";
import { hiddenFields, PageBrowser, textOf } from "./support/pages.js";

/** The page an invitation mail links to: `/invitations/{id}`, answered with Accept or Decline. */
describe.each(testDatabases())("the invitation page on $name", ({ open }) => {
  let database: DatabaseHandle;
  let iam: Iam;
  let op: Operator;
  beforeAll(async () => ({ database, iam, op } = await iamWithOperator(open)));
  afterAll(() => database?.close());

  /** An organization whose owner invites `email` (a new address unless given) as `role`. */
  async function invited(role: "admin" | "member" = "admin", email = uniqueEmail("invitee")) {
    const org = await tenantOrg(iam, op);
    const r = await call(iam, "POST", `/api/core/organizations/${org.orgId}/invitations`, { token: org.owner.token, body: { email, role } });
    if (r.status !== 201) throw new Error(`invitation refused: ${JSON.stringify(r.body)}`);
    return { ...org, invitationId: r.body.id as string, email, address: `/invitations/${r.body.id}` };
  }
  const signUpAs = (email: string) => signUp(iam, email);
  const orgIdOf = async (who: SignedUp) => (await call(iam, "GET", "/api/core/session", { token: who.token })).body.principal.orgId;

  it("shows a signed-out visitor who invites to what with which role, and the way to sign in or up with that address", async () => {
    const inv = await invited("admin");
    const page = await new PageBrowser(iam).get(inv.address);
    expect(page.status).toBe(200);
    const text = textOf(page.html);
    expect(text).toContain(`(${inv.owner.email}) invites ${inv.email} to Tenant ${inv.slug} (${inv.slug}) as an admin.`);
    expect(text).toContain(`To answer, sign in with ${inv.email}, or create an account with that address.`);
    const back = encodeURIComponent(inv.address);
    expect(page.html).toContain(`href="/sign-in?next=${back}"`);
    expect(page.html).toContain(`href="/sign-up?next=${back}"`);
    expect(page.html).not.toContain('action="/invitations/');
  });

  it("accepts for the invited address: a member with the invited role, acting in the organization, told so after a redirect", async () => {
    const inv = await invited("admin");
    const bob = await signUpAs(inv.email);
    const browser = new PageBrowser(iam, bob.cookie);
    const page = await browser.get(inv.address);
    expect(page.status).toBe(200);
    expect(page.html).toContain(`<h1>Join Tenant ${inv.slug}?</h1>`);
    const accepted = await browser.post(`${inv.address}/accept`, hiddenFields(page.html, `${inv.address}/accept`));
    expect(accepted.status).toBe(303);
    expect(accepted.location).toBe(`${inv.address}?answered=accepted`);
    const welcome = await browser.get(accepted.location!);
    expect(welcome.html).toContain(`<h1>Welcome to Tenant ${inv.slug}</h1>`);
    expect(textOf(welcome.html)).toContain(`You joined Tenant ${inv.slug} as an admin, and this browser now acts in it.`);
    expect(await orgIdOf(bob)).toBe(inv.orgId);
    const memberships = (await call(iam, "GET", "/api/core/memberships", { token: bob.token })).body.data;
    expect(memberships).toEqual([expect.objectContaining({ orgId: inv.orgId, role: "admin", active: true })]);
    // a reload shows the same; the plain address says it was accepted already
    expect((await browser.get(accepted.location!)).html).toContain("Welcome to");
    const again = await browser.get(inv.address);
    expect(again.status).toBe(200);
    expect(textOf(again.html)).toContain("was accepted already");
  });

  it("declines: no membership, the invitation closed, told so after a redirect", async () => {
    const inv = await invited("member");
    const bob = await signUpAs(inv.email);
    const browser = new PageBrowser(iam, bob.cookie);
    const page = await browser.get(inv.address);
    const declined = await browser.post(`${inv.address}/decline`, hiddenFields(page.html, `${inv.address}/decline`));
    expect(declined.status).toBe(303);
    expect(declined.location).toBe(`${inv.address}?answered=declined`);
    expect(textOf((await browser.get(declined.location!)).html)).toContain(`You declined the invitation to Tenant ${inv.slug}.`);
    expect((await call(iam, "GET", "/api/core/memberships", { token: bob.token })).body.data).toEqual([]);
    const later = await browser.get(inv.address);
    expect(later.status).toBe(410);
    expect(later.html).toContain("<h1>Invitation declined</h1>");
  });

  it("tells someone signed in with another address whom the invitation is for, and offers nothing to answer (403)", async () => {
    const inv = await invited();
    const carol = await signUp(iam);
    const page = await new PageBrowser(iam, carol.cookie).get(inv.address);
    expect(page.status).toBe(403);
    expect(textOf(page.html)).toContain(`The invitation is for ${inv.email}, and you are signed in as ${carol.email}.`);
    expect(page.html).not.toContain('action="/invitations/');
    // posting anyway is refused by the library, and nothing changes
    const csrf = hiddenFields((await new PageBrowser(iam, carol.cookie).get("/account")).html, "/account/profile").csrf!;
    const forced = await new PageBrowser(iam, carol.cookie).post(`${inv.address}/accept`, { csrf });
    expect(forced.status).toBe(400);
    expect((await call(iam, "GET", "/api/core/memberships", { token: carol.token })).body.data).toEqual([]);
  });

  it("says an expired invitation expired (410) and a withdrawn one was withdrawn (410); an unknown one is 404", async () => {
    const expiring = await invited();
    const withdrawn = await invited();
    await call(iam, "DELETE", `/api/core/organizations/${withdrawn.orgId}/invitations/${withdrawn.invitationId}`, { token: withdrawn.owner.token });
    const gone = await new PageBrowser(iam).get(withdrawn.address);
    expect(gone.status).toBe(410);
    expect(textOf(gone.html)).toContain(`This invitation to Tenant ${withdrawn.slug} was withdrawn by the organization.`);

    iam.clock.advance(8 * 86_400_000);
    try {
      const bob = await signUpAs(expiring.email);
      const page = await new PageBrowser(iam, bob.cookie).get(expiring.address);
      expect(page.status).toBe(410);
      expect(page.html).toContain("<h1>Invitation expired</h1>");
      expect(textOf(page.html)).toContain(`Ask ${expiring.owner.email.split("@")[0]} (${expiring.owner.email}) for a new one.`);
    } finally {
      iam.clock.advance(-8 * 86_400_000);
    }
    const unknown = await new PageBrowser(iam).get("/invitations/no-such-invitation");
    expect(unknown.status).toBe(404);
    expect(unknown.html).toContain("<h1>Invitation not found</h1>");
    expect((await new PageBrowser(iam).get(`/invitations/${"x".repeat(200)}`)).status).toBe(404);
  });

  it("refuses Accept without the form's CSRF token, and the invitation stays pending", async () => {
    const inv = await invited();
    const bob = await signUpAs(inv.email);
    const r = await new PageBrowser(iam, bob.cookie).post(`${inv.address}/accept`, {});
    expect(r.status).toBe(403);
    expect((await new PageBrowser(iam, bob.cookie).get(inv.address)).html).toContain('action="/invitations/');
  });

  it("lists what waits for the address on /account and on onboarding, each linking to its page", async () => {
    const inv = await invited("admin");
    const bob = await signUpAs(inv.email);
    const browser = new PageBrowser(iam, bob.cookie);
    for (const path of ["/account", "/onboarding"]) {
      const page = await browser.get(path);
      expect(textOf(page.html)).toContain(`Tenant ${inv.slug} ${inv.slug} admin · from ${inv.owner.email.split("@")[0]} · open until`);
      expect(page.html).toContain(`href="${inv.address}"`);
    }
    // answered, it is gone from both
    const page = await browser.get(inv.address);
    await browser.post(`${inv.address}/decline`, hiddenFields(page.html, `${inv.address}/decline`));
    for (const path of ["/account", "/onboarding"]) expect((await browser.get(path)).html).not.toContain(`href="${inv.address}"`);
  });

  it("lists the pending invitations of an address, newest first, and none once answered", async () => {
    const email = uniqueEmail("twice");
    const first = await invited("member", email);
    iam.clock.advance(1000);
    const second = await invited("admin", email);
    const pending = await pendingInvitationsFor(database.db, email.toUpperCase(), iam.clock.now());
    expect(pending.map((p) => [p.id, p.role, p.organization.slug])).toEqual([
      [second.invitationId, "admin", second.slug],
      [first.invitationId, "member", first.slug],
    ]);
    const bob = await signUpAs(email);
    const browser = new PageBrowser(iam, bob.cookie);
    const page = await browser.get(first.address);
    await browser.post(`${first.address}/accept`, hiddenFields(page.html, `${first.address}/accept`));
    expect((await pendingInvitationsFor(database.db, email, iam.clock.now())).map((p) => p.id)).toEqual([second.invitationId]);
  });
});
