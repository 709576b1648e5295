import { request } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listen, type RunningServer } from "@core/kit";
import { testDatabases, type DatabaseHandle } from "@core/storage";
import { call, iamWithOperator, signUp, type Iam } from "./support/harness.js";

// POST /api/validate-session over a real socket: one HTTP path, through the kit and the route, for
// the first read of a session and for its cached answer alike (DESIGN §10, ADR 0005).
describe.each(testDatabases())("validate-session over HTTP on $name", ({ open }) => {
  let database: DatabaseHandle;
  let iam: Iam;
  let service: string;
  let server: RunningServer;
  beforeAll(async () => {
    ({ database, iam, service } = await iamWithOperator(open));
    server = await listen(iam.app, 0, "127.0.0.1");
    // the service token's first use verifies it; from then on it is known
    expect((await overHttp(body("no-such-session"))).body).toEqual({ valid: false });
  });
  afterAll(async () => {
    await server?.close();
    await database?.close();
  });

  const body = (token: string) => JSON.stringify({ token });
  /** one request over a real socket; `head` is the names of the header fields it was answered with */
  const overHttp = (text: string, headers: Record<string, string> = { authorization: `Bearer ${service}` }) =>
    new Promise<{ status: number; head: string[]; body: any }>((resolve, reject) => {
      const req = request(`${server.url}/api/validate-session`, { method: "POST", headers: { "content-type": "application/json", ...headers } }, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (chunk: Buffer) => chunks.push(chunk));
        res.on("end", () => {
          const head = res.rawHeaders.filter((_, i) => i % 2 === 0).map((name) => name.toLowerCase());
          resolve({ status: res.statusCode!, head: head.sort(), body: JSON.parse(Buffer.concat(chunks).toString("utf8")) });
        });
      });
      req.on("error", reject);
      req.end(text);
    });

  it("answers a session the same whether read or cached, through the kit (request id, metrics)", async () => {
    const ada = await signUp(iam);
    const read = await overHttp(body(ada.token)); // not cached yet: read from the database
    const cached = await overHttp(body(ada.token)); // now from memory
    expect(cached).toEqual(read); // status, body and header fields
    expect(cached.head).toEqual(["connection", "content-length", "content-type", "date", "keep-alive", "x-request-id"]);
    expect(cached.body).toMatchObject({ valid: true, principal: { userId: ada.userId, email: ada.email } });
    // a body with a field more means the same token
    expect((await overHttp(JSON.stringify({ token: ada.token, extra: true }))).body).toEqual(cached.body);
    const inProcess = await call(iam, "POST", "/api/validate-session", { token: service, body: { token: ada.token } });
    expect(inProcess.body).toEqual(cached.body);
    // counted under its route pattern by the kit, as every other request is
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    expect(metrics).toMatch(/http_requests_total\{[^}]*route="\/api\/validate-session"[^}]*status="200"[^}]*\} [1-9]/);
  });

  it("answers only a known service: a person, an API key beside the token, or a forged token go the full way", async () => {
    const ada = await signUp(iam);
    expect((await overHttp(body(ada.token))).body.valid).toBe(true); // cached from here on
    const forged = `${service.slice(0, service.lastIndexOf(".") + 1)}${"A".repeat(43)}`;
    expect(await overHttp(body(ada.token), { authorization: `Bearer ${ada.token}` })).toMatchObject({ status: 401, body: { error: { code: "UNAUTHENTICATED" } } });
    expect(await overHttp(body(ada.token), { authorization: `Bearer ${forged}` })).toMatchObject({ status: 401 });
    expect(await overHttp(body(ada.token), {})).toMatchObject({ status: 401 });
    expect(await overHttp(body(ada.token), { authorization: `Bearer ${service}`, "x-api-key": "anything" })).toMatchObject({ status: 401 });
  });

  it("reads any JSON spelling of the same token, and refuses what is not JSON", async () => {
    const ada = await signUp(iam);
    const expected = (await overHttp(body(ada.token))).body;
    expect((await overHttp(` {\n\t"token" :\r"${ada.token}" } `)).body).toEqual(expected);
    const others = [
      JSON.stringify({ token: ada.token, extra: 1 }),
      `{"token":"${ada.token.slice(0, 1)}\\u${ada.token.charCodeAt(1).toString(16).padStart(4, "0")}${ada.token.slice(2)}"}`,
      `\u00a0{"token":"${ada.token}"}`,
      `{"token":"${ada.token}"`,
    ];
    expect((await overHttp(JSON.stringify({ token: `${ada.token}x` }))).body).toEqual({ valid: false });
    // the extra field and the escape are still the same token to the route
    expect((await overHttp(others[0]!)).body).toEqual(expected);
    expect((await overHttp(others[1]!)).body).toEqual(expected);
    expect(await overHttp(others[2]!)).toMatchObject({ status: 400, body: { error: { code: "BAD_REQUEST" } } });
    expect(await overHttp(others[3]!)).toMatchObject({ status: 400, body: { error: { code: "BAD_REQUEST" } } });
  });

  it("answers valid: false at once for a session revoked on this IAM, and for one that has expired", async () => {
    const ada = await signUp(iam);
    expect((await overHttp(body(ada.token))).body.valid).toBe(true);
    const out = await call(iam, "POST", "/api/auth/sign-out", { cookie: ada.cookie });
    expect(out.status).toBe(200);
    // the revocation cleared the cache: read again, and again from memory
    expect((await overHttp(body(ada.token))).body).toEqual({ valid: false });
    expect((await overHttp(body(ada.token))).body).toEqual({ valid: false });

    const bob = await signUp(iam);
    expect((await overHttp(body(bob.token))).body.valid).toBe(true);
    const expiresAt = Date.parse((await overHttp(body(bob.token))).body.principal.expiresAt);
    iam.clock.set(new Date(expiresAt + 1000));
    try {
      expect((await overHttp(body(bob.token))).body).toEqual({ valid: false });
    } finally {
      iam.clock.set(new Date());
    }
  });
});
