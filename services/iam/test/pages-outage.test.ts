import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openDatabase, type DatabaseHandle } from "@core/storage";
import { postgresBin, startPrivatePostgres, type PrivatePostgres } from "../../../test/support/private-postgres.js";
import { call, createIam, operator, signUp, tenantOrg, uniqueEmail, type Iam, type SignedUp } from "./support/harness.js";
import { startDeviceLogin } from "./support/device.js";
import { hiddenFields, PageBrowser } from "./support/pages.js";

if (process.env.CI && !postgresBin()) throw new Error("CI is set but the PostgreSQL server binaries are missing: the outage test of the pages would be skipped");

/**
 * DESIGN §10: IAM's browser pages answer a 503 HTML page with Retry-After while the database is
 * down, never a 500 (issue 26 met 500s on /account, /onboarding, /invitations/…, /device and the
 * sign-in form), and answer as before once it is back, with no restart. A PostgreSQL server of the
 * test's own is stopped and started again. The auth library's JSON routes answer the API's 503
 * UPSTREAM_UNAVAILABLE in the outage, never a 500.
 */
describe.skipIf(!postgresBin())("IAM's pages while the database is down", () => {
  let server: PrivatePostgres;
  let database: DatabaseHandle;
  let iam: Iam;
  let member: SignedUp;
  let newcomer: SignedUp;
  let invitationPath: string;
  let userCode: string;
  let verificationPath: string;
  let signInFields: Record<string, string>;
  let signInBrowser: PageBrowser;

  beforeAll(async () => {
    server = await startPrivatePostgres();
    database = await openDatabase({ url: server.url, poolSize: 5 });
    iam = await createIam(database);
    const op = await operator(iam);
    member = await signUp(iam, uniqueEmail("member"));
    const org = await tenantOrg(iam, op, member);
    newcomer = await signUp(iam, uniqueEmail("newcomer"));
    const invited = await call(iam, "POST", `/api/core/organizations/${org.orgId}/invitations`, { token: org.owner.token, body: { email: newcomer.email, role: "member" } });
    expect(invited.status).toBe(201);
    invitationPath = `/invitations/${invited.body.id}`;
    userCode = (await startDeviceLogin(iam)).user_code;
    const confirmation = iam.mailer.sent.find((m) => m.to === member.email && /Confirm your email/.test(m.subject))!;
    const link = new URL(/https?:\/\/\S+/.exec(confirmation.text)![0]);
    verificationPath = link.pathname + link.search;
    // the sign-in form as a browser holds it before the outage, to post it during
    signInBrowser = new PageBrowser(iam);
    const form = await signInBrowser.get("/sign-in");
    signInFields = { ...hiddenFields(form.html, "/sign-in"), email: member.email, password: "correct-horse-battery" };
  }, 120_000);

  afterAll(async () => {
    await database?.close().catch(() => {});
    await server?.destroy();
  });

  /** Each page, as a browser asks for it: signed in (a cookie) or not. */
  const pages = () => [
    { name: "/account", ask: () => new PageBrowser(iam, member.cookie).get("/account") },
    { name: "/onboarding", ask: () => new PageBrowser(iam, newcomer.cookie).get("/onboarding") },
    { name: "/invitations/{id}", ask: () => new PageBrowser(iam, newcomer.cookie).get(invitationPath) },
    { name: "/device?user_code=…", ask: () => new PageBrowser(iam, member.cookie).get(`/device?user_code=${userCode}`) },
    { name: "/ (signed in)", ask: () => new PageBrowser(iam, member.cookie).get("/") },
    // a session IAM knows from memory is sent on to /account without the database (which answers 503)
    { name: "/sign-in (signed in)", ask: () => new PageBrowser(iam, member.cookie).get("/sign-in"), fromMemory: 302 },
    { name: "/verify-email?token=…", ask: () => new PageBrowser(iam, member.cookie).get(verificationPath) },
    { name: "POST /sign-in", ask: () => signInBrowser.post("/sign-in", signInFields) },
  ];

  it("answers every page normally while the database is up", async () => {
    for (const page of pages()) {
      const answer = await page.ask();
      expect([200, 302, 303, 400], `${page.name}: ${answer.status}`).toContain(answer.status);
    }
  });

  it("answers a 503 HTML page with Retry-After on each page while the database is down, and as before once it is back", async () => {
    await server.stop();
    try {
      for (const page of pages()) {
        const answer = await page.ask();
        if (page.fromMemory !== undefined && answer.status === page.fromMemory) continue;
        expect(answer.status, `${page.name}: ${answer.html.slice(0, 300)}`).toBe(503);
        expect(answer.headers.get("content-type"), page.name).toMatch(/^text\/html/);
        expect(Number(answer.headers.get("retry-after")), page.name).toBeGreaterThanOrEqual(1);
        expect(answer.headers.get("cache-control"), page.name).toBe("no-store");
        expect(answer.html, page.name).toContain("Temporarily unavailable");
      }
      // a page that needs no database still works: the sign-in form of a signed-out browser
      expect((await new PageBrowser(iam).get("/sign-in")).status).toBe(200);
      // and the library's JSON routes, which keep the cause of their failures to themselves, are 503 too
      for (const path of ["/api/auth/get-session", "/api/auth/list-sessions", "/api/auth/organization/list"]) {
        const answer = await call(iam, "GET", path, { token: newcomer.token });
        expect(answer.status, `${path}: ${JSON.stringify(answer.body)}`).toBe(503);
        expect(answer.body.error.code, path).toBe("UPSTREAM_UNAVAILABLE");
        expect(Number(answer.headers.get("retry-after")), path).toBeGreaterThanOrEqual(1);
      }
    } finally {
      await server.start();
    }
    // back by itself: the pool connects again on the next request
    let account = await new PageBrowser(iam, member.cookie).get("/account");
    for (let tries = 0; account.status !== 200 && tries < 60; tries++) {
      await new Promise((resolve) => setTimeout(resolve, 500));
      account = await new PageBrowser(iam, member.cookie).get("/account");
    }
    expect(account.status).toBe(200);
    for (const page of pages()) {
      const answer = await page.ask();
      expect([200, 302, 303, 400], `${page.name} after the outage: ${answer.status}`).toContain(answer.status);
    }
  });
});
