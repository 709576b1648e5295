import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startLiveIam, type LiveIam } from "../../../packages/cli/test/support/live-iam.js";
import { Browsers, hasChromium, look, requireBrowserOrSkip } from "../../../test/support/chromium.js";
import { call, operator, signUp, tenantOrg, uniqueEmail, type Operator } from "./support/harness.js";

requireBrowserOrSkip();

/**
 * An invitation as the invitee meets it: the link in the mail, the invitation page signed out, an
 * account made with the invited address, Accept, and the account page in the new organization. In
 * headless Chromium against IAM listening on loopback; every page photographed for a reviewer.
 */
describe.skipIf(!hasChromium)("an invitation in a real browser (Chromium)", () => {
  let live: LiveIam;
  let op: Operator;
  const browsers = new Browsers();

  beforeAll(async () => {
    live = await startLiveIam();
    op = await operator(live.iam);
  });
  afterAll(async () => {
    await browsers.close();
    await live?.close();
  });

  const heading = (page: Page) => page.locator("h1").innerText();

  /** The link of the last invitation mail to `email`, pointed at the listening IAM. */
  const linkInMail = (email: string) => {
    const mail = live.iam.mailer.sent.findLast((m) => m.to === email && /invites you to/.test(m.subject))!;
    return /https?:\/\/\S+\/invitations\/\S+/.exec(mail.text)![0].replace(live.iam.config.iamUrl, live.iamUrl);
  };

  it("follows the mailed link, signs up with the invited address, accepts and lands in the organization", async () => {
    const org = await tenantOrg(live.iam, op);
    const email = uniqueEmail("invited");
    const invited = await call(live.iam, "POST", `/api/core/organizations/${org.orgId}/invitations`, { token: org.owner.token, body: { email, role: "admin" } });
    expect(invited.status).toBe(201);

    const page = await browsers.fresh();
    await page.goto(linkInMail(email));
    expect(await heading(page)).toBe(`Join Tenant ${org.slug}?`);
    expect(await page.locator(".card").first().innerText()).toContain(`invites ${email} to Tenant ${org.slug} (${org.slug}) as an admin.`);
    await look(page, "20-invitation-signed-out");

    await page.getByRole("link", { name: "Create an account" }).click();
    expect(await heading(page)).toBe("Create your account");
    expect(await page.locator("#sign-in-purpose").innerText()).toContain("Create your account to answer your invitation");
    await page.getByLabel("Your name").fill("Ivy Invited");
    await page.getByLabel("Email").fill(email);
    await page.getByLabel("Password").fill("correct-horse-battery");
    await page.getByRole("button", { name: "Create account" }).click();

    // back on the invitation, now answerable
    expect(await heading(page)).toBe(`Join Tenant ${org.slug}?`);
    await look(page, "21-invitation-answer");
    await page.getByRole("button", { name: "Accept" }).click();
    expect(await heading(page)).toBe(`Welcome to Tenant ${org.slug}`);
    expect(await page.getByRole("status").innerText()).toContain("You joined");
    await look(page, "22-invitation-accepted");
    // a reload after the success shows it again
    await page.reload();
    expect(await heading(page)).toBe(`Welcome to Tenant ${org.slug}`);

    await page.getByRole("link", { name: "Your organizations" }).click();
    expect(await heading(page)).toBe("Your account");
    const orgs = await page.locator("section#organizations").innerText();
    expect(orgs).toContain(`Tenant ${org.slug}`);
    expect(orgs).toContain("Active here");
    expect(orgs).toContain("admin");
  }, 90_000);

  it("shows someone signed in with another address whom it is for, and a withdrawn invitation as withdrawn", async () => {
    const org = await tenantOrg(live.iam, op);
    const email = uniqueEmail("elsewhere");
    const invited = await call(live.iam, "POST", `/api/core/organizations/${org.orgId}/invitations`, { token: org.owner.token, body: { email } });
    const someoneElse = await signUp(live.iam);

    const page = await browsers.fresh();
    await page.goto(`${live.iamUrl}/sign-in`);
    await page.getByLabel("Email", { exact: true }).fill(someoneElse.email);
    await page.getByLabel("Password", { exact: true }).fill("correct-horse-battery");
    await page.getByRole("button", { name: "Sign in", exact: true }).click();
    await page.goto(linkInMail(email));
    expect(await heading(page)).toBe("This invitation is for someone else");
    expect(await page.getByRole("alert").innerText()).toContain(`The invitation is for ${email}, and you are signed in as ${someoneElse.email}.`);
    await look(page, "23-invitation-for-someone-else");

    await call(live.iam, "DELETE", `/api/core/organizations/${org.orgId}/invitations/${invited.body.id}`, { token: org.owner.token });
    await page.reload();
    expect(await heading(page)).toBe("Invitation withdrawn");
  }, 90_000);
});
