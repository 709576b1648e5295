import { describe, expect, it } from "vitest";
import { createServiceApp, silentLogger } from "@core/kit";
import type { CredentialResolvers, Principal } from "@core/service-auth";
import { guardServiceCaller } from "../src/access.js";

const person = { type: "user", userId: "usr_p", email: "p@example.com" } as Principal;
const KNOWN_JWT = "eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJiaWxsaW5nIn0.c2ln";
const OTHER_JWT = "eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJ2YXVsdCJ9.c2ln";

/** The service-only routes' guard (validate-session): no promise when the credential is known already (ADR 0005). */
describe("guardServiceCaller", () => {
  const asked: string[] = [];
  const resolvers: CredentialResolvers = {
    session: async (token) => (asked.push(`session:${token}`), token === "valid-session" ? person : null),
    apiKey: async () => null,
    serviceToken: async (jwt) => (asked.push("serviceToken"), jwt === OTHER_JWT ? { serviceId: "vault" } : null),
    known: {
      session: (token) => (token === "known-session" ? person : undefined),
      serviceToken: (jwt) => (jwt === KNOWN_JWT ? "billing" : undefined),
    },
  };
  const app = createServiceApp({ service: "iam", title: "t", logger: silentLogger() });
  // reports whether the guard handed back something to wait for, then what waiting gave
  app.get("/guarded", async (c) => {
    let waited: unknown;
    try {
      waited = guardServiceCaller(c, resolvers);
    } catch (err) {
      return c.json({ at: "at once", refused: (err as { status?: number }).status });
    }
    if (waited === undefined) return c.json({ at: "at once", passed: true });
    try {
      await waited;
      return c.json({ at: "after waiting", passed: true });
    } catch (err) {
      return c.json({ at: "after waiting", refused: (err as { status?: number }).status });
    }
  });
  const guard = async (bearer: string) => {
    asked.length = 0;
    const res = await app.request("/guarded", { headers: { authorization: `Bearer ${bearer}` } });
    return { ...((await res.json()) as object), asked: [...asked] };
  };

  it("lets a known service token through at once, asking nothing", async () => {
    expect(await guard(KNOWN_JWT)).toEqual({ at: "at once", passed: true, asked: [] });
  });

  it("refuses a known person's session at once with 401, asking nothing", async () => {
    expect(await guard("known-session")).toEqual({ at: "at once", refused: 401, asked: [] });
  });

  it("asks about a service token it does not know, and lets it through once verified", async () => {
    expect(await guard(OTHER_JWT)).toEqual({ at: "after waiting", passed: true, asked: ["serviceToken"] });
  });

  it("asks about a session it does not know, and refuses it with 401 when it is a person's", async () => {
    expect(await guard("valid-session")).toEqual({ at: "after waiting", refused: 401, asked: ["session:valid-session"] });
  });

  it("refuses an invalid service token with 401 after asking", async () => {
    expect(await guard("eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.eA")).toEqual({ at: "after waiting", refused: 401, asked: ["serviceToken"] });
  });
});
