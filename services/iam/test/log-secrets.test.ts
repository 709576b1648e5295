import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "@core/kit";
import { testDatabases, type DatabaseHandle } from "@core/storage";
import { call, createApiKey, createIam, operator, PASSWORD, serviceToken, signIn, signUp, tenantOrg, uniqueEmail, type Iam } from "./support/harness.js";
import { pollToken, refresh, startDeviceLogin } from "./support/device.js";
import { PageBrowser } from "./support/pages.js";

/** Every line IAM writes, at debug level, kept for reading. */
function capturedLog() {
  const lines: string[] = [];
  return { stream: { write: (line: string) => void lines.push(line) }, lines };
}

const linkIn = (text: string) => new URL(/https?:\/\/\S+/.exec(text)![0]);

/**
 * Issue 26: a whole run of IAM's flows (sign-up, sign-in, a password reset through its link, API
 * keys used and guessed, a device login with its refresh, an invitation, a magic link, an address
 * confirmation, and input IAM refuses) logs no secret: no session token, reset token or link, API
 * key, password, cookie, device or user code, refresh token, invitation id or magic link; and input
 * IAM refused is no error-level line.
 */
describe.each(testDatabases())("secrets in the log of a whole IAM run on $name", ({ open }) => {
  let database: DatabaseHandle;
  let iam: Iam;
  const log = capturedLog();
  const secrets = new Map<string, string>();
  const keep = (what: string, value: string | undefined | null) => {
    expect(value, what).toBeTruthy();
    secrets.set(`${what} #${secrets.size}`, value!);
  };
  const mailTo = (email: string, subject: RegExp) => iam.mailer.sent.filter((m) => m.to === email && subject.test(m.subject)).at(-1)!;

  beforeAll(async () => {
    database = await open();
    iam = await createIam(database, {
      logger: createLogger("iam", "debug", log.stream),
      config: { rateLimits: { enabled: true, signIn: 50, signUp: 50, magicLink: 50, apiKeyFailures: 50 } },
    });
  });
  afterAll(() => database?.close());

  it("runs every flow", async () => {
    const op = await operator(iam);
    keep("operator session", op.token);
    keep("operator cookie", op.cookie.split("=")[1]);

    // sign-up and sign-in
    const ada = await signUp(iam, uniqueEmail("ada"));
    keep("session token", ada.token);
    keep("cookie", ada.cookie.split("=")[1]);
    keep("password", PASSWORD);
    const again = await signIn(iam, ada);
    keep("second session token", again.token);
    const wrong = await call(iam, "POST", "/api/auth/sign-in/email", { headers: { origin: iam.origin }, body: { email: ada.email, password: "wrong-password-secret" } });
    expect(wrong.status).toBe(401);
    keep("wrong password", "wrong-password-secret");

    // another session's list-sessions
    const listed = await call(iam, "GET", "/api/auth/list-sessions", { token: again.token });
    expect(listed.status).toBe(200);
    expect(JSON.stringify(listed.body)).not.toContain(ada.token);

    // address confirmation through its link
    const verification = linkIn(mailTo(ada.email, /Confirm your email/).text);
    keep("verification token", verification.searchParams.get("token"));
    expect((await new PageBrowser(iam, ada.cookie).get(verification.pathname + verification.search)).status).toBe(200);

    // a password reset: asked, then the library's link route, then the new password
    expect((await call(iam, "POST", "/api/auth/request-password-reset", { body: { email: ada.email, redirectTo: "/reset-password" } })).status).toBe(200);
    const resetLink = linkIn(mailTo(ada.email, /password/i).text);
    const resetToken = resetLink.searchParams.get("token")!;
    keep("reset token", resetToken);
    keep("reset link", resetLink.href);
    const viaLibrary = await iam.app.request(`/api/auth/reset-password/${resetToken}?callbackURL=%2Freset-password`);
    expect(viaLibrary.status).toBe(302);
    expect((await new PageBrowser(iam).get(resetLink.pathname + resetLink.search)).status).toBe(200);
    const newPassword = "a-new-password-secret-42";
    keep("new password", newPassword);
    const reset = await call(iam, "POST", "/api/auth/reset-password", { body: { token: resetToken, newPassword } });
    expect(reset.status).toBe(200);
    const ada2 = await signIn(iam, ada, newPassword);
    keep("session after reset", ada2.token);

    // API keys: made, used, guessed (at IAM and through the validate route of services)
    const { key } = await createApiKey(iam, ada2);
    keep("API key", key);
    expect((await call(iam, "POST", "/api/v1/cli/whoami", { headers: { "x-api-key": key } })).status).toBe(200);
    const guess = `core_${"g".repeat(40)}`;
    keep("guessed key", guess);
    expect((await call(iam, "POST", "/api/v1/cli/whoami", { headers: { "x-api-key": guess } })).status).toBe(401);
    const service = await serviceToken(iam);
    keep("service token", service);
    for (const candidate of [guess, key]) {
      expect((await call(iam, "POST", "/api/core/apikey/validate", { token: service, body: { key: candidate, clientIp: "198.51.100.7" } })).status).toBe(200);
    }

    // a device login, its activation page, its refresh
    const started = await startDeviceLogin(iam);
    keep("device code", started.device_code);
    keep("user code", started.user_code);
    expect((await new PageBrowser(iam, ada2.cookie).get(`/device?user_code=${started.user_code}`)).status).toBe(200);
    expect((await call(iam, "POST", "/oauth/device/authorize", { token: ada2.token, body: { user_code: started.user_code } })).status).toBe(200);
    const tokens = await pollToken(iam, started.device_code);
    keep("access token", tokens.body.access_token);
    keep("refresh token", tokens.body.refresh_token);
    const refreshed = await refresh(iam, tokens.body.refresh_token);
    expect(refreshed.status).toBe(200);
    keep("refreshed access token", refreshed.body.access_token);
    keep("refreshed refresh token", refreshed.body.refresh_token);

    // an invitation: made by the owner, opened from its mail, accepted
    const org = await tenantOrg(iam, op);
    const bea = await signUp(iam, uniqueEmail("bea"));
    const invited = await call(iam, "POST", `/api/core/organizations/${org.orgId}/invitations`, { token: org.owner.token, body: { email: bea.email, role: "member" } });
    expect(invited.status).toBe(201);
    const invitationLink = linkIn(mailTo(bea.email, /invit/i).text);
    keep("invitation id", invited.body.id);
    expect((await new PageBrowser(iam, bea.cookie).get(invitationLink.pathname)).status).toBe(200);
    expect((await call(iam, "GET", `/api/core/organizations/${org.orgId}/invitations/${invited.body.id}`, { token: org.owner.token })).status).toBeLessThan(500);
    const accepted = await call(iam, "POST", "/api/auth/organization/accept-invitation", { token: bea.token, headers: { origin: iam.origin }, body: { invitationId: invited.body.id } });
    expect(accepted.status).toBe(200);

    // a magic link, asked and followed
    const cy = uniqueEmail("cy");
    expect((await call(iam, "POST", "/api/auth/sign-in/magic-link", { body: { email: cy } })).status).toBe(200);
    const magic = linkIn(mailTo(cy, /sign-in link/).text);
    keep("magic-link token", magic.searchParams.get("token"));
    expect((await new PageBrowser(iam).get(magic.pathname + magic.search)).status).toBe(302);

    // input IAM refuses: a callbackURL elsewhere, an untrusted Origin, a cross-site form
    const marker = "https://evil.example/client-text-marker";
    const refusedCallback = await call(iam, "POST", "/api/auth/sign-in/email", { headers: { origin: iam.origin }, body: { email: ada.email, password: newPassword, callbackURL: marker } });
    expect(refusedCallback.status).toBe(403);
    const refusedOrigin = await call(iam, "POST", "/api/auth/sign-out", { cookie: ada2.cookie, headers: { origin: "https://origin-marker.example" } });
    expect(refusedOrigin.status).toBe(403);
    const crossSite = await call(iam, "POST", "/api/auth/sign-in/email", {
      headers: { "sec-fetch-site": "cross-site", "sec-fetch-mode": "navigate", "sec-fetch-dest": "document" },
      body: { email: ada.email, password: newPassword },
    });
    expect(crossSite.status).toBe(403);
    expect((await call(iam, "GET", "/api/auth/reset-password/made-up-reset-token?callbackURL=%2Freset-password")).status).toBe(302);
    keep("made-up reset token", "made-up-reset-token");
  });

  it("wrote none of the secrets in any line, at any level", () => {
    expect(log.lines.length).toBeGreaterThan(30);
    const text = log.lines.join("");
    for (const [what, value] of secrets) expect(text.includes(value), `${what} is in the log`).toBe(false);
    // the reset link's path is logged redacted
    expect(text).toContain('"path":"/api/auth/reset-password/[redacted]"');
    // the client's own text of a refused callbackURL or Origin is not echoed
    expect(text).not.toContain("client-text-marker");
    expect(text).not.toContain("origin-marker");
  });

  it("wrote no error-level line: every refusal above was the client's input, not IAM's failure", () => {
    const errors = log.lines.map((l) => JSON.parse(l) as { level: number; msg: string }).filter((l) => l.level >= 50);
    expect(errors).toEqual([]);
    const refusals = log.lines.map((l) => JSON.parse(l) as { level: number; msg: string; library?: string }).filter((l) => l.library === "better-auth");
    expect(refusals.map((l) => l.msg)).toEqual(expect.arrayContaining([expect.stringMatching(/refused a callbackURL/), expect.stringMatching(/refused an untrusted Origin/)]));
  });
});
