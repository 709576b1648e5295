import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rowsOf, testDatabases, type DatabaseHandle } from "@core/storage";
import { call, createIam, failingFields, serviceToken, signUp, type Iam } from "./support/harness.js";

const PROFILE_KEYS = ["createdAt", "email", "emailVerified", "id", "image", "name"];

describe.each(testDatabases())("profile on $name", ({ open }) => {
  let database: DatabaseHandle;
  let iam: Iam;

  beforeAll(async () => {
    database = await open();
    iam = await createIam(database);
  });
  afterAll(async () => {
    await database?.close();
  });

  const patch = (person: { token: string }, body: unknown) => call(iam, "PATCH", "/api/auth/profile", { token: person.token, body });

  describe("GET /api/auth/profile", () => {
    it("answers the caller's profile", async () => {
      const ada = await signUp(iam);
      const r = await call(iam, "GET", "/api/auth/profile", { token: ada.token });
      expect(r.status).toBe(200);
      expect(Object.keys(r.body).sort()).toEqual(PROFILE_KEYS);
      expect(r.body).toEqual({
        id: ada.userId,
        email: ada.email,
        name: ada.email.split("@")[0],
        image: null,
        emailVerified: false,
        createdAt: expect.any(Number),
      });
      expect(Math.abs(r.body.createdAt - Math.floor(Date.now() / 1000))).toBeLessThan(120);
    });

    it("answers to the session cookie too", async () => {
      const ada = await signUp(iam);
      expect((await call(iam, "GET", "/api/auth/profile", { cookie: ada.cookie })).body.id).toBe(ada.userId);
    });

    it("refuses a request without a session, with a wrong one, or with a service token, with 401", async () => {
      expect((await call(iam, "GET", "/api/auth/profile")).status).toBe(401);
      expect((await call(iam, "GET", "/api/auth/profile", { token: "wrong" })).status).toBe(401);
      expect((await call(iam, "GET", "/api/auth/profile", { token: await serviceToken(iam) })).status).toBe(401);
    });
  });

  describe("PATCH /api/auth/profile", () => {
    it("changes the name and the image, answering the updated profile", async () => {
      const ada = await signUp(iam);
      const r = await patch(ada, { name: "Ada Lovelace", image: "https://images.example.com/ada.png" });
      expect(r.status).toBe(200);
      expect(Object.keys(r.body).sort()).toEqual(PROFILE_KEYS);
      expect(r.body).toMatchObject({ id: ada.userId, name: "Ada Lovelace", image: "https://images.example.com/ada.png" });
      expect((await call(iam, "GET", "/api/auth/profile", { token: ada.token })).body).toEqual(r.body);
      expect((await call(iam, "GET", "/api/core/session", { token: ada.token })).body.user).toMatchObject({ name: "Ada Lovelace" });
    });

    it("clears the image with null and leaves fields that are not given alone", async () => {
      const ada = await signUp(iam);
      await patch(ada, { name: "Ada", image: "https://images.example.com/ada.png" });
      const r = await patch(ada, { image: null });
      expect(r.body).toMatchObject({ name: "Ada", image: null });
      const unchanged = await patch(ada, {});
      expect(unchanged).toMatchObject({ status: 200, body: { name: "Ada", image: null } });
    });

    it("changes nobody else's profile", async () => {
      const ada = await signUp(iam);
      const bob = await signUp(iam);
      await patch(ada, { name: "Only Ada" });
      expect((await call(iam, "GET", "/api/auth/profile", { token: bob.token })).body.name).toBe(bob.email.split("@")[0]);
    });

    it("accepts names of 1 and of 100 characters", async () => {
      const ada = await signUp(iam);
      expect((await patch(ada, { name: "A" })).body.name).toBe("A");
      expect((await patch(ada, { name: "n".repeat(100) })).body.name).toBe("n".repeat(100));
    });

    it.each([
      ["an empty name", { name: "" }, "name"],
      ["a name of 101 characters", { name: "n".repeat(101) }, "name"],
      ["a name that is not a string", { name: 7 }, "name"],
      ["an image that is not a URI", { image: "not a uri" }, "image"],
      ["an image with a script URI", { image: "javascript:alert(1)" }, "image"],
      ["an image that is not a string", { image: 7 }, "image"],
    ])("answers 400 VALIDATION_ERROR for %s", async (_label, body, field) => {
      const ada = await signUp(iam);
      const r = await patch(ada, body);
      expect(r.status).toBe(400);
      expect(r.body.error.code).toBe("VALIDATION_ERROR");
      expect(failingFields(r.body)).toContain(field);
      expect((await call(iam, "GET", "/api/auth/profile", { token: ada.token })).body.name).toBe(ada.email.split("@")[0]);
    });

    it("answers 400 VALIDATION_ERROR naming an unknown field, and changes nothing", async () => {
      const ada = await signUp(iam);
      const r = await patch(ada, { name: "Ada", email: "someone-else@example.com" });
      expect(r.status).toBe(400);
      expect(r.body.error.code).toBe("VALIDATION_ERROR");
      expect(JSON.stringify(r.body.error.details)).toContain("email");
      const profile = (await call(iam, "GET", "/api/auth/profile", { token: ada.token })).body;
      expect(profile).toMatchObject({ email: ada.email, name: ada.email.split("@")[0] });
    });

    it("refuses a request without a session or with a wrong one with 401", async () => {
      expect((await call(iam, "PATCH", "/api/auth/profile", { body: { name: "X" } })).status).toBe(401);
      expect((await patch({ token: "wrong" }, { name: "X" })).status).toBe(401);
    });

    it("refuses a cookie-carrying change from an untrusted origin with 403", async () => {
      const ada = await signUp(iam);
      const r = await call(iam, "PATCH", "/api/auth/profile", { cookie: ada.cookie, headers: { origin: "https://evil.example" }, body: { name: "Mallory" } });
      expect(r.status).toBe(403);
      const ok = await call(iam, "PATCH", "/api/auth/profile", { cookie: ada.cookie, body: { name: "Ada" } });
      expect(ok.body.name).toBe("Ada");
    });

    it("writes the change to the audit log, naming the fields", async () => {
      const ada = await signUp(iam);
      await patch(ada, { name: "Audited" });
      // reading through the audit route needs an operator; the log itself is checked here
      const rows = rowsOf<{ action: string; target_id: string; metadata: unknown }>(
        await database.db.execute(sql`select action, target_id, metadata from iam.audit_events where action = 'profile.update' and actor_id = ${ada.userId}`),
      );
      expect(rows).toEqual([{ action: "profile.update", target_id: ada.userId, metadata: { fields: ["name"] } }]);
    });
  });
});
