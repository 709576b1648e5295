import { describe, expect, it } from "vitest";
import { randomBytes } from "node:crypto";
import { createLogger, createServiceApp } from "@core/kit";

/** A pino destination that keeps every line written to it. */
function captured() {
  const lines: string[] = [];
  return {
    stream: { write: (line: string) => void lines.push(line) },
    text: () => lines.join(""),
    records: () => lines.map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}

const SECRETS = {
  password: "pw-hunter2",
  token: "tok-5ecret",
  authorization: "Bearer bearer-5ecret",
  cookie: "better-auth.session_token=cookie-5ecret",
  apiKey: "key-5ecret",
  refresh: "refresh-5ecret",
};

describe("logger", () => {
  it("refuses an unknown LOG_LEVEL with a ConfigError naming the levels, and takes the known ones", () => {
    const out = captured();
    expect(() => createLogger("iam", "loud", out.stream)).toThrow(expect.objectContaining({ name: "ConfigError", message: expect.stringContaining('LOG_LEVEL must be one of trace, debug, info, warn, error, fatal, silent; got "loud"') }));
    for (const level of ["trace", "debug", "info", "warn", "error", "fatal", "silent"]) expect(createLogger("iam", level, out.stream).level).toBe(level);
  });

  it("writes structured JSON lines naming the service", () => {
    const out = captured();
    createLogger("billing", "info", out.stream).info({ orgId: "org_1" }, "hello");
    expect(out.records()).toEqual([expect.objectContaining({ service: "billing", orgId: "org_1", msg: "hello", level: 30 })]);
  });

  it("censors secrets at the top level of a logged object", () => {
    const out = captured();
    createLogger("iam", "info", out.stream).info(
      { password: SECRETS.password, token: SECRETS.token, authorization: SECRETS.authorization, cookie: SECRETS.cookie, refresh_token: SECRETS.refresh },
      "sign-in",
    );
    const text = out.text();
    for (const value of [SECRETS.password, SECRETS.token, SECRETS.authorization, SECRETS.cookie, SECRETS.refresh]) {
      expect(text).not.toContain(value);
    }
    expect(out.records()[0]).toMatchObject({ password: "[redacted]", token: "[redacted]", authorization: "[redacted]" });
  });

  it("censors secrets nested inside request-like objects", () => {
    const out = captured();
    createLogger("iam", "info", out.stream).info(
      {
        body: { email: "a@example.com", password: SECRETS.password },
        headers: { authorization: SECRETS.authorization, cookie: SECRETS.cookie, "x-api-key": SECRETS.apiKey },
        req: { headers: { authorization: SECRETS.authorization, "x-api-key": SECRETS.apiKey }, body: { user: { password: SECRETS.password } } },
        items: [{ token: SECRETS.token }],
      },
      "request received",
    );
    const text = out.text();
    for (const value of Object.values(SECRETS).filter((v) => v !== SECRETS.refresh)) expect(text).not.toContain(value);
    // what is not a secret stays readable
    expect(text).toContain("a@example.com");
  });

  it("censors secret keys at any depth, arrays and errors included, and keeps an error's code", () => {
    const out = captured();
    const deep = { a: { b: { c: { d: { e: { f: { client_secret: "cs-5ecret", items: [{ user_code: "WXYZ-1234" }] } } } } } } };
    createLogger("iam", "info", out.stream).info(
      {
        deep,
        oauth: { code: "oauth-code-5ecret", state: "state-5ecret", code_verifier: "verifier-5ecret" },
        twoFactor: { backupCodes: ["abcde-12345"], totpURI: "otpauth://totp/Core?secret=JBSWY3DPEHPK3PXP" },
        err: Object.assign(new Error("failed"), { code: "ECONNREFUSED", refreshToken: "refresh-5ecret" }),
        failure: { code: "INVALID_PASSWORD" },
      },
      "deep",
    );
    const text = out.text();
    for (const value of ["cs-5ecret", "WXYZ-1234", "oauth-code-5ecret", "state-5ecret", "verifier-5ecret", "abcde-12345", "JBSWY3DPEHPK3PXP", "refresh-5ecret"]) expect(text).not.toContain(value);
    const [record] = out.records() as [{ err: { code: string; message: string }; failure: { code: string } }];
    // an error's code names what failed, not a credential
    expect(record.err).toMatchObject({ code: "ECONNREFUSED", message: "failed" });
    expect(record.failure.code).toBe("INVALID_PASSWORD");
    // the caller's object is left as it was
    expect(deep.a.b.c.d.e.f.client_secret).toBe("cs-5ecret");
  });

  it("takes what looks like a credential out of every string it writes, the message too", () => {
    const out = captured();
    const portal = `bps_${randomBytes(32).toString("base64url")}`;
    const jwt = "eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJhZGEifQ.c2lnbmF0dXJlLXNlY3JldA";
    createLogger("billing", "info", out.stream).error(
      {
        err: { message: `the auth library answered 500 to GET /verify-email?token=${jwt}&callbackURL=%2F` },
        url: `http://127.0.0.1/portal/${portal}`,
        address: new URL(`http://127.0.0.1/verify?token=plain-token-5ecret`),
      },
      `failed for ${portal}`,
    );
    const text = out.text();
    expect(text).not.toContain(portal);
    expect(text).not.toContain(jwt);
    expect(text).not.toContain("plain-token-5ecret");
    const [record] = out.records() as [{ err: { message: string }; msg: string }];
    expect(record.err.message).toBe("the auth library answered 500 to GET /verify-email?token=[redacted]&callbackURL=%2F");
    expect(record.msg).toBe("failed for [redacted]");
  });

  it("logs nothing below its level", () => {
    const out = captured();
    const logger = createLogger("iam", "warn", out.stream);
    logger.info("not shown");
    logger.warn("shown");
    expect(out.records().map((r) => r.msg)).toEqual(["shown"]);
  });
});

describe("request logs", () => {
  it("log one line per request with the path but without the query string", async () => {
    const out = captured();
    const app = createServiceApp({ service: "kit-log", title: "t", logger: createLogger("kit-log", "info", out.stream) });
    app.get("/verify", (c) => c.json({ ok: true }));
    const res = await app.request(`/verify?token=${SECRETS.token}&callbackURL=%2F`, {
      headers: { authorization: SECRETS.authorization, cookie: SECRETS.cookie, "x-api-key": SECRETS.apiKey, "x-request-id": "req-log-1" },
    });
    expect(res.status).toBe(200);
    const requests = out.records().filter((r) => r.msg === "request");
    expect(requests).toEqual([
      expect.objectContaining({ service: "kit-log", requestId: "req-log-1", method: "GET", path: "/verify", status: 200 }),
    ]);
    const text = out.text();
    for (const value of [SECRETS.token, SECRETS.authorization, SECRETS.cookie, SECRETS.apiKey, "callbackURL"]) {
      expect(text).not.toContain(value);
    }
  });

  it("log the secret path parameters a service declares redacted, for the route that answered and every route below it", async () => {
    const out = captured();
    const app = createServiceApp({
      service: "kit-log",
      title: "t",
      logger: createLogger("kit-log", "info", out.stream),
      secretPathParameters: { "/portal/:id": ["id"], "/api/auth/reset-password/:token": ["token"], "/orgs/{orgId}/invitations/{invitationId}": ["invitationId"] },
    });
    app.get("/portal/open", (c) => c.json({ open: true }));
    app.get("/portal/:id", (c) => c.json({ ok: true }));
    app.get("/portal/:id/invoices/:invoiceId", (c) => c.json({ ok: true }));
    app.get("/orgs/:orgId/invitations/:invitationId", (c) => c.json({ ok: true }));
    app.get("/api/auth/*", (c) => c.json({ library: true }));
    const session = "plain-session-id";
    for (const path of [`/portal/${session}`, `/portal/${session}/invoices/inv_123`, "/portal/open", `/portal/${session}/no-such-page`, "/orgs/org_7/invitations/invitation-secret", `/api/auth/reset-password/${SECRETS.token}`]) {
      await app.request(`${path}?callbackURL=%2F`);
    }
    const paths = out.records().filter((r) => r.msg === "request").map((r) => r.path);
    expect(paths).toEqual([
      "/portal/[redacted]",
      "/portal/[redacted]/invoices/inv_123",
      // a route of its own, not a session: the route table decides
      "/portal/open",
      // no route answered: the declared pattern is matched against the path
      "/portal/[redacted]/no-such-page",
      "/orgs/org_7/invitations/[redacted]",
      // under a library's wildcard route, the same
      "/api/auth/reset-password/[redacted]",
    ]);
    expect(out.text()).not.toContain(session);
    expect(out.text()).not.toContain("invitation-secret");
  });

  it("refuse a declaration naming a parameter its pattern lacks", () => {
    expect(() => createServiceApp({ service: "t", title: "t", logger: createLogger("t", "silent"), secretPathParameters: { "/portal/:id": ["session"] } })).toThrow('/portal/:id has no parameter "session"');
  });

  it("log credentials by their shape on any path, declared or not, and keep ids and names readable", async () => {
    const out = captured();
    const app = createServiceApp({ service: "kit-log", title: "t", logger: createLogger("kit-log", "info", out.stream) });
    const pasted = [`core_${"aB3".repeat(20)}`, `bps_${randomBytes(32).toString("base64url")}`, `${"eyJhbGciOiJFZERTQSJ9"}.eyJzdWIiOiJpYW0ifQ.c2lnbmF0dXJl`, randomBytes(32).toString("base64url")];
    for (const secret of pasted) await app.request(`/platforms/${secret}`);
    const readable = ["/platforms/plt_k3v9x0a1b2c3d4e5f6g7", "/api/core/organizations/YP7Gk4rm5W0C0epuqWKqQlyj2mLbFGIk", "/api/v1/stacks/web-app/1.0.0", "/platforms/my-company-production-platform-2024-eu-west-1"];
    for (const path of readable) await app.request(path);
    const paths = out.records().filter((r) => r.msg === "request").map((r) => r.path);
    expect(paths).toEqual([...pasted.map(() => "/platforms/[redacted]"), ...readable]);
  });
  it("log an unexpected error with its request id, and the response stays free of it", async () => {
    const out = captured();
    const app = createServiceApp({ service: "kit-log", title: "t", logger: createLogger("kit-log", "info", out.stream) });
    app.get("/boom", () => {
      throw new Error("disk on fire");
    });
    const res = await app.request("/boom", { headers: { "x-request-id": "req-log-500" } });
    expect(res.status).toBe(500);
    expect(await res.text()).not.toContain("disk on fire");
    const errorLine = out.records().find((r) => r.msg === "unhandled error");
    expect(errorLine).toMatchObject({ requestId: "req-log-500", err: { message: "disk on fire" } });
  });
});
