import type { CDPSession, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listen, type RunningServer } from "@core/kit";
import { testDatabases, type DatabaseHandle } from "@core/storage";
import { Browsers, hasChromium, look, requireBrowserOrSkip } from "../../../test/support/chromium.js";
import { createIam, freePort, PASSWORD, signUp, uniqueEmail, type Iam } from "./support/harness.js";

requireBrowserOrSkip();

/**
 * Passkeys as a person uses them (issue 28): IAM listening on loopback, headless Chromium with the
 * DevTools protocol's virtual authenticator (a platform authenticator that holds resident keys and
 * verifies its user), and our own script doing the WebAuthn calls. IAM's address is
 * http://localhost:<port>: a secure context, and a host name a passkey can be bound to (an IP address
 * such as 127.0.0.1 cannot be a WebAuthn relying party id).
 */
describe.skipIf(!hasChromium)("passkeys in a real browser (Chromium, virtual authenticator)", () => {
  let database: DatabaseHandle;
  let iam: Iam;
  let server: RunningServer;
  let iamUrl: string;
  const browsers = new Browsers();

  beforeAll(async () => {
    database = await testDatabases()[0]!.open();
    const port = await freePort();
    iamUrl = `http://localhost:${port}`;
    iam = await createIam(database, { config: { iamUrl, trustedOrigins: [iamUrl], returnOrigins: [iamUrl] } });
    // the browser waits in real time: IAM's clock follows the wall clock
    iam.clock.now = () => new Date();
    server = await listen(iam.app, port, "127.0.0.1");
  });
  afterAll(async () => {
    await browsers.close();
    await server?.close();
    await database?.close();
  });

  const heading = (page: Page) => page.locator("h1").innerText();
  const passkeyItems = (page: Page) => page.locator("section[aria-labelledby=passkeys-heading] li");

  /** The DevTools protocol's virtual authenticator, attached to this page (WebAuthn.addVirtualAuthenticator). */
  async function virtualAuthenticator(page: Page): Promise<{ cdp: CDPSession; authenticatorId: string }> {
    const cdp = await page.context().newCDPSession(page);
    await cdp.send("WebAuthn.enable");
    const { authenticatorId } = await cdp.send("WebAuthn.addVirtualAuthenticator", {
      options: { protocol: "ctap2", transport: "internal", hasResidentKey: true, hasUserVerification: true, isUserVerified: true, automaticPresenceSimulation: true },
    });
    return { cdp, authenticatorId };
  }

  it("adds a passkey on /account, signs out, signs in with it, renames and removes it", async () => {
    const ada = await signUp(iam, uniqueEmail("passkey"));
    const page = await browsers.fresh();
    const { cdp, authenticatorId } = await virtualAuthenticator(page);

    await page.goto(`${iamUrl}/sign-in?next=%2Faccount`);
    await page.getByLabel("Email", { exact: true }).fill(ada.email);
    await page.getByLabel("Password", { exact: true }).fill(PASSWORD);
    await page.getByRole("button", { name: "Sign in", exact: true }).click();
    expect(await heading(page)).toBe("Your account");
    const section = page.locator("section[aria-labelledby=passkeys-heading]");
    expect(await section.innerText()).toContain("You have no passkeys.");
    // the script shows the form; the no-script sentence stays hidden
    await expect.poll(() => page.locator("#passkey-add").isVisible()).toBe(true);
    await look(page, "passkey-01-account-without-passkeys");

    await page.getByLabel("Name for the new passkey").fill("test laptop");
    await page.getByRole("button", { name: "Add a passkey" }).click();
    await page.waitForURL(/\/account\?created=passkey/);
    expect(await page.getByRole("status").first().innerText()).toContain("Your passkey is added");
    expect(await passkeyItems(page).count()).toBe(1);
    expect(await passkeyItems(page).first().innerText()).toMatch(/test laptop\s+added \d{4}-\d\d-\d\d · this device only · not backed up/);
    await look(page, "passkey-02-account-passkey-added");
    await page.setViewportSize({ width: 360, height: 740 });
    await look(page, "passkey-02-account-passkey-added-mobile");
    await page.setViewportSize({ width: 1000, height: 800 });
    const { credentials } = await cdp.send("WebAuthn.getCredentials", { authenticatorId });
    expect(credentials).toHaveLength(1);
    expect(credentials[0]!.isResidentCredential).toBe(true);
    expect(credentials[0]!.rpId).toBe("localhost");

    await page.getByRole("button", { name: "Sign out", exact: true }).click();
    expect(await heading(page)).toBe("Sign in");
    await page.goto(`${iamUrl}/sign-in?next=%2Faccount`);
    await expect.poll(() => page.getByRole("button", { name: "Sign in with a passkey" }).isVisible()).toBe(true);
    await look(page, "passkey-03-sign-in");
    await page.getByRole("button", { name: "Sign in with a passkey" }).click();
    await page.waitForURL(`${iamUrl}/account`);
    expect(await heading(page)).toBe("Your account");
    expect(await page.locator(".who").innerText()).toBe(ada.email);
    const audited = await iam.app.ctx.audit.list({ action: "auth.passkey_sign_in", actorId: ada.userId, limit: 5 });
    expect(audited.data[0]).toMatchObject({ outcome: "success" });
    await look(page, "passkey-04-signed-in-with-passkey");

    await page.getByLabel("New name for test laptop").fill("desk laptop");
    await page.getByRole("button", { name: "Rename" }).click();
    expect(await page.getByRole("status").first().innerText()).toContain("The passkey is renamed.");
    expect(await passkeyItems(page).first().innerText()).toContain("desk laptop");
    await look(page, "passkey-05-renamed");

    await page.getByRole("button", { name: "Remove the passkey desk laptop" }).click();
    expect(await page.getByRole("status").first().innerText()).toContain("The passkey is removed");
    expect(await passkeyItems(page).count()).toBe(0);
    await look(page, "passkey-06-removed");

    // the authenticator still holds the credential, but IAM no longer knows it: the sign-in says so
    await page.getByRole("button", { name: "Sign out", exact: true }).click();
    await expect.poll(() => page.getByRole("button", { name: "Sign in with a passkey" }).isVisible()).toBe(true);
    await page.getByRole("button", { name: "Sign in with a passkey" }).click();
    await expect.poll(() => page.locator("#passkey-sign-in-error").isVisible()).toBe(true);
    expect(await page.locator("#passkey-sign-in-error").innerText()).toBe("This passkey is not registered with Core. Sign in another way, then add it on your account page.");
    expect(new URL(page.url()).pathname).toBe("/sign-in");
    await look(page, "passkey-07-sign-in-removed-passkey");

    // with script off, the page says why there is no passkey button, and the password form still works
    await cdp.send("Emulation.setScriptExecutionDisabled", { value: true });
    await page.goto(`${iamUrl}/sign-in`);
    expect(await page.locator("#passkey-needs-script").innerText()).toBe("Signing in with a passkey needs JavaScript, which is off in this browser. Use your password or an emailed link.");
    expect(await page.getByRole("button", { name: "Sign in with a passkey" }).isVisible()).toBe(false);
    await look(page, "passkey-08-sign-in-without-script");
  }, 120_000);
});
