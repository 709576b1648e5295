import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabases, type DatabaseHandle } from "@core/storage";
import { call, signUp, type Iam, iamOn } from "./support/harness.js";

/** Who is calling is settled before input is validated: a bad body without a credential is 401, never 400. */
describe.each(testDatabases())("route guards on $name", ({ open }) => {
  let database: DatabaseHandle;
  let iam: Iam;
  beforeAll(async () => ({ database, iam } = await iamOn(open)));
  afterAll(() => database?.close());

  it.each([
    ["POST", "/api/core/org-setup", { slug: "BAD SLUG" }],
    ["POST", "/api/core/roles", { orgId: "" }],
    ["POST", "/api/core/grants", { expiresAt: -1 }],
    ["POST", "/api/core/organizations", { slug: "BAD SLUG" }],
    ["POST", "/api/core/organizations/org_x/invitations", { email: "not-an-email" }],
    ["POST", "/internal/platform-status", { status: "gone" }],
    ["POST", "/api/validate-session", {}],
    ["POST", "/api/core/apikey/validate", {}],
    ["PATCH", "/api/auth/profile", { name: "" }],
    ["GET", "/api/audit/events?limit=0", undefined],
    ["GET", "/api/core/roles", undefined],
  ])("%s %s with bad input and no credential answers 401", async (method, path, body) => {
    const r = await call(iam, method, path, { body });
    expect(r.status).toBe(401);
    expect(r.body.error).toMatchObject({ code: "UNAUTHENTICATED", details: null });
    const wrong = await call(iam, method, path, { body, token: "not-a-session" });
    expect(wrong.status).toBe(401);
  });

  it("answers 401 with a Basic challenge to a service-token request without Basic credentials, whatever its body", async () => {
    const r = await call(iam, "POST", "/api/core/service-token", { body: {} });
    expect(r.status).toBe(401);
    expect(r.headers.get("www-authenticate")).toMatch(/^Basic /);
  });

  it("answers 401 to a person's session on the service-only routes, before reading the body", async () => {
    const ada = await signUp(iam);
    for (const path of ["/api/validate-session", "/api/core/apikey/validate"]) {
      const r = await call(iam, "POST", path, { body: {}, token: ada.token });
      expect(r.status).toBe(401);
    }
  });

  it("validates the input once the caller is known", async () => {
    const ada = await signUp(iam);
    const r = await call(iam, "PATCH", "/api/auth/profile", { body: { name: "" }, token: ada.token });
    expect(r.status).toBe(400);
    expect(r.body.error.code).toBe("VALIDATION_ERROR");
  });
});
