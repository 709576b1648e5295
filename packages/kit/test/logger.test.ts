import { describe, expect, it } from "vitest";
import { createLogger, createServiceApp, loggablePath } from "@core/kit";

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

  it("log a path's secret segments redacted: a password-reset token, an invitation id", async () => {
    const out = captured();
    const app = createServiceApp({ service: "kit-log", title: "t", logger: createLogger("kit-log", "info", out.stream) });
    app.get("/api/auth/reset-password/:token", (c) => c.json({ ok: true }));
    expect((await app.request(`/api/auth/reset-password/${SECRETS.token}?callbackURL=%2Freset-password`)).status).toBe(200);
    // an unmatched path is logged as the client sent it, but for its secret segments
    expect((await app.request(`/invitations/${SECRETS.token}/accept`)).status).toBe(404);
    const paths = out.records().filter((r) => r.msg === "request").map((r) => r.path);
    expect(paths).toEqual(["/api/auth/reset-password/[redacted]", "/invitations/[redacted]/accept"]);
    expect(out.text()).not.toContain(SECRETS.token);
  });

  it("leave paths without secrets as they are", () => {
    for (const path of ["/reset-password", "/api/auth/reset-password", "/invitations", "/api/sessions/ses_1", "/device/decided/dvc_1", "/api/auth/magic-link/verify"]) {
      expect(loggablePath(path)).toBe(path);
    }
    expect(loggablePath("/api/core/organizations/org_1/invitations/inv_2")).toBe("/api/core/organizations/org_1/invitations/[redacted]");
    expect(loggablePath("/API/AUTH/RESET-PASSWORD/abc/x")).toBe("/API/AUTH/RESET-PASSWORD/[redacted]/x");
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
