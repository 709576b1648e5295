import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabases, type DatabaseHandle } from "@core/storage";
import { iamWithOperator, staffedOrg, type Iam, type Operator } from "./support/harness.js";
import { hiddenFields, PageBrowser, textOf } from "./support/pages.js";
import { authorizeAddress, publicClient } from "./support/authorization-code.js";

/** The consent page of the OAuth provider and the sign-in page as its login page (oauth-consent.tsx, sign-in.tsx). */
describe.each(testDatabases())("the OAuth consent page on $name", ({ open }) => {
  let database: DatabaseHandle;
  let iam: Iam;
  let op: Operator;

  beforeAll(async () => {
    ({ database, iam, op } = await iamWithOperator(open));
  });
  afterAll(async () => {
    await database?.close();
  });

  /** A member's browser at the consent page of a fresh client's request. */
  async function atConsent() {
    const org = await staffedOrg(iam, op);
    const clientId = await publicClient(iam);
    const browser = new PageBrowser(iam, org.member.cookie);
    const asked = await browser.get(authorizeAddress({ clientId }));
    const page = await browser.get(asked.location!);
    return { org, clientId, browser, address: asked.location!, page };
  }

  it("names the client, where it returns, the organization and the scopes in words", async () => {
    const { org, page } = await atConsent();
    expect(page.status).toBe(200);
    const text = textOf(page.html);
    expect(text).toContain("Test agent asks to use your Core account");
    expect(text).toContain("Returns to 127.0.0.1:7777");
    expect(text).toContain(`Acts in Tenant ${org.slug}`);
    expect(text).toContain("Read the documents in the Core vault that your organization may read");
    expect(text).toContain("Stay connected");
    expect(page.html).toMatch(/<button type="submit" name="decision" value="allow">\s*Allow\s*<\/button>/);
    expect(page.html).toMatch(/<button type="submit" name="decision" value="deny" class="secondary">\s*Deny\s*<\/button>/);
    // the answer redirects to the client: the page's form-action allows its origin, and nothing else new
    expect(page.headers.get("content-security-policy")).toContain("form-action 'self' http://127.0.0.1:7777;");
    expect(page.headers.get("cache-control")).toBe("no-store");
    expect(page.headers.get("x-frame-options")).toBe("DENY");
  });

  it("sends a signed-out browser to sign in first, coming back to the same request", async () => {
    const { address } = await atConsent();
    const r = await new PageBrowser(iam).get(address);
    expect(r.status).toBe(302);
    expect(r.location).toBe(`/sign-in?next=${encodeURIComponent(address)}`);
  });

  it("answers 400 when no signed request came with the page", async () => {
    const { org } = await staffedOrg(iam, op).then((o) => ({ org: o }));
    const r = await new PageBrowser(iam, org.member.cookie).get("/oauth/consent?client_id=abc");
    expect(r.status).toBe(400);
    expect(textOf(r.html)).toContain("No request to answer");
  });

  it("refuses an answer without the page's CSRF token", async () => {
    const { browser, page } = await atConsent();
    const { csrf: _csrf, ...withoutToken } = hiddenFields(page.html, "/oauth/consent");
    const r = await browser.post("/oauth/consent", { ...withoutToken, decision: "allow" });
    expect(r.status).toBe(403);
  });

  it("refuses an answer that is neither Allow nor Deny", async () => {
    const { browser, page } = await atConsent();
    const r = await browser.post("/oauth/consent", { ...hiddenFields(page.html, "/oauth/consent"), decision: "maybe" });
    expect(r.status).toBe(400);
    expect(textOf(r.html)).toContain("Choose Allow or Deny");
  });

  it("refuses a request whose signature does not match (a changed redirect URI), without redirecting", async () => {
    const { browser, page } = await atConsent();
    const fields = hiddenFields(page.html, "/oauth/consent");
    const tampered = fields.oauth_query!.replace(encodeURIComponent("http://127.0.0.1:7777/callback"), encodeURIComponent("http://127.0.0.1:7777/stolen"));
    expect(tampered).not.toBe(fields.oauth_query);
    const r = await browser.post("/oauth/consent", { ...fields, oauth_query: tampered, decision: "allow" });
    expect(r.status).toBe(400);
    expect(r.location).toBeNull();
  });

  it("the sign-in page, as the provider's login page, returns to authorize with the request as the client made it", async () => {
    const clientId = await publicClient(iam);
    const browser = new PageBrowser(iam);
    const asked = await browser.get(authorizeAddress({ clientId, state: "st" }));
    expect(asked.location!.startsWith("/sign-in?")).toBe(true);
    const page = await browser.get(asked.location!);
    expect(page.status).toBe(200);
    expect(textOf(page.html)).toContain("Sign in to let an app (an AI agent or editor) read the Core vault for you.");
    const next = new URL(hiddenFields(page.html, "/sign-in").next!, iam.config.iamUrl);
    expect(next.pathname).toBe("/api/auth/oauth2/authorize");
    expect(Object.fromEntries(next.searchParams)).toMatchObject({ client_id: clientId, state: "st", response_type: "code", code_challenge_method: "S256" });
    for (const added of ["sig", "exp", "ba_iat", "ba_param"]) expect(next.searchParams.has(added)).toBe(false);
  });
});
