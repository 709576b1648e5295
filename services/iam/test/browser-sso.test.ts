import { eq } from "drizzle-orm";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listen, type RunningServer } from "@core/kit";
import { testDatabases, type DatabaseHandle } from "@core/storage";
import { Browsers, hasChromium, look, requireBrowserOrSkip, SCREENSHOTS } from "../../../test/support/chromium.js";
import { member, user } from "../src/db/schema.js";
import { call, createIam, freePort, operator, PASSWORD, signUp, uniqueEmail, uniqueSlug, type Iam } from "./support/harness.js";
import { startIdp, type Idp } from "./support/oidc-idp.js";

requireBrowserOrSkip();

/**
 * Single sign-on as people do it (issue 28): an owner registers the organization's provider on
 * /account/sso, an operator approves its domain, and a member signs in from the sign-in page
 * through a real OpenID Connect provider (`oidc-provider`, its own sign-in and consent pages) on
 * 127.0.0.1, all in headless Chromium; each of our pages photographed into test-output/screenshots/.
 */
describe.skipIf(!hasChromium)("single sign-on round trip in a real browser (Chromium)", () => {
  let database: DatabaseHandle;
  let iam: Iam;
  let idp: Idp;
  let server: RunningServer;
  let iamUrl: string;
  const browsers = new Browsers();
  const slug = uniqueSlug("sso");
  const domain = `${slug}.example`;

  beforeAll(async () => {
    database = await testDatabases()[0]!.open();
    const port = await freePort();
    iamUrl = `http://127.0.0.1:${port}`;
    idp = await startIdp({ redirectUris: [`${iamUrl}/api/auth/sso/callback/${slug}-oidc`] });
    // the organization brings its provider: no operator lists it (on loopback, as the embedded database allows)
    iam = await createIam(database, { config: { iamUrl, trustedOrigins: [iamUrl] } });
    // the browser waits in real time: IAM's clock follows the wall clock
    iam.clock.now = () => new Date();
    server = await listen(iam.app, port, "127.0.0.1");
  });
  afterAll(async () => {
    await browsers.close();
    await server?.close();
    await idp?.close();
    await database?.close();
  });

  const heading = (page: Page) => page.locator("h1").innerText();

  /** The provider's own pages: its sign-in form (any password), then its consent. */
  async function signInAtProvider(page: Page, login: string, shot: string) {
    await page.waitForURL((url) => url.origin === idp.origin);
    await page.locator('input[name="login"]').fill(login);
    await page.locator('input[name="password"]').fill("anything");
    await page.screenshot({ path: `${SCREENSHOTS}/${shot}-provider-sign-in.png`, fullPage: true });
    await page.locator('button[type="submit"]').click();
    await page.waitForURL((url) => url.origin === idp.origin && url.pathname.startsWith("/interaction/"));
    await page.locator('button[type="submit"]').click();
  }

  it("an owner registers the provider on /account/sso; after approval, a person signs in from the sign-in page, joins the organization and lands on their account", async () => {
    const ops = await operator(iam);
    const owner = await signUp(iam, uniqueEmail("owner"));
    const org = await call(iam, "POST", "/api/core/organizations", { token: ops.token, body: { name: "Acme Robotics", slug, ownerId: owner.userId } });
    expect(org.status).toBe(201);

    // the owner: signs in with a password, follows the link on their account page
    const ownerPage = await browsers.fresh();
    await ownerPage.goto(`${iamUrl}/sign-in`);
    await ownerPage.getByLabel("Email", { exact: true }).fill(owner.email);
    await ownerPage.getByLabel("Password", { exact: true }).fill(PASSWORD);
    await ownerPage.getByRole("button", { name: "Sign in", exact: true }).click();
    await ownerPage.waitForURL(`${iamUrl}/account`);
    await ownerPage.getByRole("link", { name: "Single sign-on for the organizations you own" }).click();
    expect(await heading(ownerPage)).toBe("Single sign-on");
    await ownerPage.getByLabel("Issuer URL").fill(idp.issuer);
    await ownerPage.getByLabel("Client id").fill(idp.clientId);
    await ownerPage.getByLabel("Client secret").fill(idp.clientSecret);
    await ownerPage.getByLabel("Email domains").fill(domain);
    await look(ownerPage, "sso-01-owner-register");
    await ownerPage.getByRole("button", { name: "Register provider" }).click();
    await ownerPage.waitForURL(`${iamUrl}/account/sso?done=created`);
    const registered = await ownerPage.locator("main").innerText();
    expect(registered).toContain("Waiting for an operator to approve the domains");
    expect(registered).toContain(`${iamUrl}/api/auth/sso/callback/${slug}-oidc`);
    expect(await ownerPage.content()).not.toContain(idp.clientSecret);
    await look(ownerPage, "sso-02-owner-registered");

    // an operator approves the domain claim
    expect((await call(iam, "POST", `/api/core/sso-providers/${slug}-oidc/approval`, { token: ops.token })).status).toBe(200);

    // a person of the organization: from the sign-in page, by their work address, through the provider
    const email = `ada@${domain}`;
    idp.addAccount("ada", { email, emailVerified: true, name: "Ada Lovelace" });
    const page = await browsers.fresh();
    await page.goto(`${iamUrl}/sign-in?next=${encodeURIComponent("/account")}`);
    await page.getByRole("link", { name: "Sign in with your organization's single sign-on" }).click();
    expect(await heading(page)).toBe("Sign in with single sign-on");
    await page.getByLabel("Work email").fill(email);
    await look(page, "sso-03-sign-in-by-address");
    await page.getByRole("button", { name: "Continue" }).click();
    await signInAtProvider(page, "ada", "sso-04");
    await page.waitForURL(`${iamUrl}/account`);
    expect(await heading(page)).toBe("Your account");
    const account = await page.locator("main").innerText();
    expect(account).toContain(email);
    expect(account).toContain("Acme Robotics");
    await look(page, "sso-05-signed-in");

    const [created] = await database.db.select().from(user).where(eq(user.email, email));
    const [joined] = await database.db.select().from(member).where(eq(member.userId, created!.id));
    expect(joined).toMatchObject({ organizationId: org.body.id, role: "member" });
  }, 120_000);

  it("GET /sign-in/sso?organization=<slug>&next=<path> goes to the provider at once and comes back to next; a refusal is a page", async () => {
    idp.addAccount("grace", { email: `grace@${domain}`, emailVerified: true, name: "Grace Hopper" });
    const page = await browsers.fresh();
    await page.goto(`${iamUrl}/sign-in/sso?organization=${slug}&next=${encodeURIComponent("/account?via=policy")}`);
    await signInAtProvider(page, "grace", "sso-06");
    await page.waitForURL(`${iamUrl}/account?via=policy`);
    expect(await page.locator("main").innerText()).toContain(`grace@${domain}`);

    // someone the provider knows under an address outside the organization's domains
    idp.addAccount("mallory", { email: "mallory@elsewhere.example", emailVerified: true, name: "Mallory" });
    const refused = await browsers.fresh();
    await refused.goto(`${iamUrl}/sign-in/sso?organization=${slug}`);
    await signInAtProvider(refused, "mallory", "sso-07");
    await refused.waitForURL((url) => url.origin === iamUrl && url.pathname === "/sign-in/sso");
    expect(await refused.locator('[role="alert"], .alert').first().innerText()).toContain("outside the domains of the organization");
    await look(refused, "sso-08-refused-outside-domains");
  }, 120_000);
});
