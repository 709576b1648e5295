import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sql } from "drizzle-orm";
import { rowsOf, testDatabases, type DatabaseHandle } from "@core/storage";
import { call, cookiesOf, createIam, iamWithOperator, PASSWORD, signUp, uniqueEmail, type Iam, type Operator, type SignedUp } from "./support/harness.js";
import { PageBrowser } from "./support/pages.js";
import { clearOfStepBoundary, secretOfUri, totp } from "./support/totp.js";

/** The `name=value` pairs of an answer's Set-Cookie headers, as one Cookie header (expired ones left out). */

/**
 * Issue 28: two-factor sign-in with the auth library's plugin, through its JSON routes, and what our
 * layer adds (a replayed TOTP refused, a magic link held at the second step, disable needs a code).
 */
describe.each(testDatabases())("two-factor on $name", ({ open }) => {
  let database: DatabaseHandle;
  let iam: Iam;
  let op: Operator;

  beforeAll(async () => ({ database, iam, op } = await iamWithOperator(open)));
  afterAll(() => database?.close());

  const methodOf = async (token: string) =>
    rowsOf<{ sign_in_method: string | null }>(await database.db.execute(sql`select sign_in_method from iam.session where token = ${token}`))[0]?.sign_in_method;
  const auditOf = async (action: string, actorId?: string) =>
    ((await call(iam, "GET", `/api/audit/events?action=${action}${actorId ? `&actorId=${actorId}` : ""}`, { token: op.token })).body.data ?? []) as {
      outcome: string;
      actorId: string | null;
      metadata: Record<string, unknown>;
    }[];

  /** A user with two-factor on: their secret, backup codes, and the session that enrolled. */
  async function enrolled(person?: SignedUp) {
    const who = person ?? (await signUp(iam, uniqueEmail("tfa")));
    const enable = await call(iam, "POST", "/api/auth/two-factor/enable", { token: who.token, body: { password: PASSWORD } });
    expect(enable.status).toBe(200);
    const secret = secretOfUri(enable.body.totpURI);
    // the step before now: a later test may use the current one without meeting this one as a replay
    await clearOfStepBoundary();
    const confirm = await call(iam, "POST", "/api/auth/two-factor/verify-totp", { token: who.token, body: { code: totp(secret, -1) } });
    expect(confirm.status, JSON.stringify(confirm.body)).toBe(200);
    return { ...who, token: confirm.body.token as string, secret, backupCodes: enable.body.backupCodes as string[] };
  }

  /** Password sign-in: the plugin's challenge cookie, and no session. */
  async function firstStep(person: { email: string }) {
    const r = await call(iam, "POST", "/api/auth/sign-in/email", { body: { email: person.email, password: PASSWORD } });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ twoFactorRedirect: true, twoFactorMethods: ["totp"] });
    expect(r.body.token).toBeUndefined();
    return cookiesOf(r.headers);
  }

  const secondStep = (cookie: string, route: "verify-totp" | "verify-backup-code", code: string) =>
    call(iam, "POST", `/api/auth/two-factor/${route}`, { cookie, body: { code } });

  it("enrols with the password and a code; the backup codes are stored encrypted, never as given", async () => {
    const ada = await enrolled();
    const [row] = rowsOf<{ secret: string; backup_codes: string; verified: boolean }>(
      await database.db.execute(sql`select secret, backup_codes, verified from iam.two_factor where user_id = ${ada.userId}`),
    );
    expect(row!.verified).toBe(true);
    expect(ada.backupCodes).toHaveLength(10);
    for (const code of ada.backupCodes) expect(row!.backup_codes).not.toContain(code);
    expect(row!.secret).not.toContain(ada.secret.toString("utf8"));
    expect(await methodOf(ada.token)).toBe("password+totp");
    expect(await auditOf("auth.two_factor.enable", ada.userId)).toContainEqual(expect.objectContaining({ outcome: "success" }));
  });

  it("gives no session for the password alone; a code completes it, marked password+totp", async () => {
    const ada = await enrolled();
    const cookie = await firstStep(ada);
    const done = await secondStep(cookie, "verify-totp", totp(ada.secret));
    expect(done.status).toBe(200);
    expect(await methodOf(done.body.token)).toBe("password+totp");
    expect((await call(iam, "GET", "/api/core/session", { token: done.body.token })).status).toBe(200);
    expect(await auditOf("auth.two_factor.verify", ada.userId)).toContainEqual(expect.objectContaining({ outcome: "success" }));
  });

  it("refuses to trust a device: no sign-in may skip the code, so a two-factor policy never holds back a session that has none to give", async () => {
    const ada = await enrolled();
    const cookie = await firstStep(ada);
    const trusted = await call(iam, "POST", "/api/auth/two-factor/verify-totp", { cookie, body: { code: totp(ada.secret), trustDevice: true } });
    expect(trusted.status).toBe(400);
    expect(trusted.body.code).toBe("TRUST_DEVICE_NOT_OFFERED");
    expect(trusted.headers.get("set-cookie") ?? "").not.toContain("trust_device");
    // the code was not spent: the same one completes the sign-in without trust
    expect((await secondStep(cookie, "verify-totp", totp(ada.secret))).status).toBe(200);
  });

  it("refuses a wrong code, and audits it under the user", async () => {
    const ada = await enrolled();
    const cookie = await firstStep(ada);
    const wrongCode = totp(ada.secret) === "000000" ? "111111" : "000000";
    const wrong = await secondStep(cookie, "verify-totp", wrongCode);
    expect(wrong.status).toBe(401);
    expect(wrong.body.code).toBe("INVALID_CODE");
    expect(await auditOf("auth.two_factor.verify", ada.userId)).toContainEqual(expect.objectContaining({ outcome: "failure" }));
  });

  it("refuses a TOTP code used once already within its window", async () => {
    const ada = await enrolled();
    const code = totp(ada.secret);
    const first = await secondStep(await firstStep(ada), "verify-totp", code);
    expect(first.status).toBe(200);
    const again = await secondStep(await firstStep(ada), "verify-totp", code);
    expect(again.status).toBe(401);
    expect(again.body.code).toBe("TOTP_CODE_REUSED");
    expect(again.body).not.toHaveProperty("token");
    // an older step than the last accepted one is refused too
    const older = await secondStep(await firstStep(ada), "verify-totp", totp(ada.secret, -1));
    expect(older.status).toBe(401);
  });

  it("takes a backup code once, marked password+backup_code; the same code again is refused", async () => {
    const ada = await enrolled();
    const code = ada.backupCodes[0]!;
    const used = await secondStep(await firstStep(ada), "verify-backup-code", code);
    expect(used.status).toBe(200);
    expect(await methodOf(used.body.token)).toBe("password+backup_code");
    const reused = await secondStep(await firstStep(ada), "verify-backup-code", code);
    expect(reused.status).toBe(401);
    expect(reused.body.code).toBe("INVALID_BACKUP_CODE");
    expect(await auditOf("auth.two_factor.backup_code", ada.userId)).toEqual(
      expect.arrayContaining([expect.objectContaining({ outcome: "success" }), expect.objectContaining({ outcome: "failure" })]),
    );
  });

  it("holds a magic link of an enrolled user at the second step, then marks it magic_link+totp", async () => {
    const ada = await enrolled();
    const browser = new PageBrowser(iam);
    await browser.submit("/sign-in", "/sign-in/magic-link", { email: ada.email });
    const mail = iam.mailer.sent.findLast((m) => m.to === ada.email && /sign-in link/.test(m.subject))!;
    const link = new URL(/https?:\/\/\S+/.exec(mail.text)![0]);
    const landed = await browser.get(`${link.pathname}${link.search}`);
    expect(landed.status).toBe(302);
    expect(landed.location).toMatch(/^\/sign-in\/two-factor\?next=/);
    expect(browser.cookies.has("better-auth.session_token")).toBe(false);
    expect(browser.cookies.has("better-auth.two_factor")).toBe(true);
    expect(await auditOf("auth.magic_link.verify", ada.userId)).toContainEqual(expect.objectContaining({ outcome: "success" }));
    const done = await call(iam, "POST", "/api/auth/two-factor/verify-totp", { cookie: browser.cookieHeader, body: { code: totp(ada.secret) } });
    expect(done.status).toBe(200);
    expect(await methodOf(done.body.token)).toBe("magic_link+totp");
  });

  it("turns two-factor off only with the password and a valid code", async () => {
    const ada = await enrolled();
    const noCode = await call(iam, "POST", "/api/auth/two-factor/disable", { token: ada.token, body: { password: PASSWORD } });
    expect(noCode.status).toBe(401);
    const wrong = await call(iam, "POST", "/api/auth/two-factor/disable", { token: ada.token, body: { password: PASSWORD, code: "12345-abcde" } });
    expect(wrong.status).toBe(401);
    expect(wrong.body.code).toBe("INVALID_CODE");
    expect(await auditOf("auth.two_factor.disable", ada.userId)).toContainEqual(expect.objectContaining({ outcome: "failure" }));
    const off = await call(iam, "POST", "/api/auth/two-factor/disable", { token: ada.token, body: { password: PASSWORD, code: ada.backupCodes[1] } });
    expect(off.status, JSON.stringify(off.body)).toBe(200);
    const plain = await call(iam, "POST", "/api/auth/sign-in/email", { body: { email: ada.email, password: PASSWORD } });
    expect(plain.body.token).toEqual(expect.any(String));
    expect(await methodOf(plain.body.token)).toBe("password");
  });

  it("keeps how a session was made when a password change signs the others out and replaces it", async () => {
    const ada = await enrolled();
    const changed = await call(iam, "POST", "/api/auth/change-password", {
      token: ada.token,
      body: { currentPassword: PASSWORD, newPassword: `${PASSWORD}-2`, revokeOtherSessions: true },
    });
    expect(changed.status).toBe(200);
    expect(changed.body.token).not.toBe(ada.token);
    expect(await methodOf(changed.body.token)).toBe("password+totp");
  });

  it("regenerates backup codes with the password: the old ones stop working", async () => {
    const ada = await enrolled();
    const fresh = await call(iam, "POST", "/api/auth/two-factor/generate-backup-codes", { token: ada.token, body: { password: PASSWORD } });
    expect(fresh.status).toBe(200);
    expect(fresh.body.backupCodes).toHaveLength(10);
    const old = await secondStep(await firstStep(ada), "verify-backup-code", ada.backupCodes[0]!);
    expect(old.status).toBe(401);
    const now = await secondStep(await firstStep(ada), "verify-backup-code", fresh.body.backupCodes[0]);
    expect(now.status).toBe(200);
    expect(await auditOf("auth.two_factor.backup_codes_regenerate", ada.userId)).toContainEqual(expect.objectContaining({ outcome: "success" }));
  });

  it("never writes a code or the secret into the audit log", async () => {
    const ada = await enrolled();
    await secondStep(await firstStep(ada), "verify-backup-code", ada.backupCodes[2]!);
    const rows = rowsOf<{ metadata: unknown }>(await database.db.execute(sql`select metadata from iam.audit_events where actor_id = ${ada.userId}`));
    const text = JSON.stringify(rows);
    for (const code of ada.backupCodes) expect(text).not.toContain(code);
  });
});

describe.each(testDatabases())("two-factor rate limits on $name", ({ open }) => {
  let database: DatabaseHandle;
  let iam: Iam;

  beforeAll(async () => {
    database = await open();
    iam = await createIam(database, { config: { rateLimits: { enabled: true, twoFactor: 4, signIn: 100, signUp: 100 } } });
  });
  afterAll(() => database?.close());

  it("answers 429 with Retry-After once the code attempts of a window are spent", async () => {
    const statuses: number[] = [];
    let retryAfter: string | null = null;
    // 4 in our window, not the plugin's own 3 in 10 seconds
    for (let i = 0; i < 6; i++) {
      const r = await call(iam, "POST", "/api/auth/two-factor/verify-totp", { body: { code: "000000" } });
      statuses.push(r.status);
      retryAfter = r.headers.get("retry-after");
    }
    expect(Number(retryAfter)).toBeGreaterThan(0);
    expect(statuses.slice(0, 4).every((s) => s !== 429)).toBe(true);
    expect(statuses.slice(4)).toEqual([429, 429]);
    // the backup-code route counts on its own
    expect((await call(iam, "POST", "/api/auth/two-factor/verify-backup-code", { body: { code: "aaaaa-bbbbb" } })).status).not.toBe(429);
  });
});
