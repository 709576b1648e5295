import { request, type IncomingHttpHeaders } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listen, loadCommonConfig, silentLogger, type RunningServer } from "@core/kit";
import { testDatabases, type DatabaseHandle } from "@core/storage";
import { buildService } from "../src/index.js";
import { call, iamWithOperator, signUp, TEST_SECRET, type Iam } from "./support/harness.js";

// POST /api/validate-session on a server answers a known service before Hono: from memory for a
// cached session, else after the route's own read (ADR 0005). These tests hold it to the route's answers.
describe.each(testDatabases())("validate-session answered from memory on $name", ({ open }) => {
  let database: DatabaseHandle;
  let iam: Iam;
  let service: string;
  let server: RunningServer;
  beforeAll(async () => {
    ({ database, iam, service } = await iamWithOperator(open));
    server = await listen(iam.app, 0, "127.0.0.1");
    // the service token's first use verifies it (the full path); from then on it is known
    expect(hot().answer(asService(), body("no-such-session"))).toBeUndefined();
    await overHttp(body("no-such-session"));
  });
  afterAll(async () => {
    await server?.close();
    await database?.close();
  });

  const hot = () => iam.app.hotRoutes.routes.get("/api/validate-session")!;
  const asService = (): IncomingHttpHeaders => ({ authorization: `Bearer ${service}`, "content-type": "application/json" });
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

  it("gives a session the very answer the route gives, read once and then from memory", async () => {
    const ada = await signUp(iam);
    const read = hot().answer(asService(), body(ada.token)); // not cached yet: read as the route reads it
    expect(read).toBeInstanceOf(Promise);
    // the route's own answer: a body with a field more is left to it, and means the same token
    const route = await overHttp(JSON.stringify({ token: ada.token, extra: true }));
    expect(JSON.parse((await read)!)).toEqual(route.body);
    const cached = hot().answer(asService(), body(ada.token));
    expect(typeof cached).toBe("string");
    const second = await overHttp(body(ada.token));
    expect(second).toEqual(route); // status, body and header fields
    expect(second.head).toEqual(["connection", "content-length", "content-type", "date", "keep-alive", "x-request-id"]);
    expect(second.body).toMatchObject({ valid: true, principal: { userId: ada.userId, email: ada.email } });
    expect(JSON.parse(cached as string)).toEqual(second.body);
    const inProcess = await call(iam, "POST", "/api/validate-session", { token: service, body: { token: ada.token } });
    expect(inProcess.body).toEqual(second.body);
  });

  it("answers only a known service: a person, an API key beside the token, or a forged token go the full way", async () => {
    const ada = await signUp(iam);
    await overHttp(body(ada.token));
    expect(hot().answer(asService(), body(ada.token))).toBeDefined();
    expect(hot().answer({ ...asService(), authorization: `Bearer ${ada.token}` }, body(ada.token))).toBeUndefined();
    expect(hot().answer({ ...asService(), "x-api-key": "anything" }, body(ada.token))).toBeUndefined();
    expect(hot().answer({ "content-type": "application/json" }, body(ada.token))).toBeUndefined();
    const forged = `${service.slice(0, service.lastIndexOf(".") + 1)}${"A".repeat(43)}`;
    expect(hot().answer({ ...asService(), authorization: `Bearer ${forged}` }, body(ada.token))).toBeUndefined();
    // and the full way refuses them as it always did
    expect(await overHttp(body(ada.token), { authorization: `Bearer ${ada.token}` })).toMatchObject({ status: 401, body: { error: { code: "UNAUTHENTICATED" } } });
    expect(await overHttp(body(ada.token), { authorization: `Bearer ${forged}` })).toMatchObject({ status: 401 });
    expect(await overHttp(body(ada.token), {})).toMatchObject({ status: 401 });
  });

  it("reads only the plainest body; any other goes the full way and gets the route's answer", async () => {
    const ada = await signUp(iam);
    const expected = (await overHttp(body(ada.token))).body;
    expect(hot().answer(asService(), ` {\n\t"token" :\r"${ada.token}" } `)).toBeDefined();
    const others = [
      JSON.stringify({ token: ada.token, extra: 1 }),
      `{"token":"${ada.token.slice(0, 1)}\\u${ada.token.charCodeAt(1).toString(16).padStart(4, "0")}${ada.token.slice(2)}"}`,
      `\u00a0{"token":"${ada.token}"}`,
      `{"token":"${ada.token}"`,
    ];
    for (const other of others) expect(hot().answer(asService(), other)).toBeUndefined();
    // an unknown token in the plainest body is the route's question too: read, and invalid
    expect(await hot().answer(asService(), JSON.stringify({ token: `${ada.token}x` }))).toBe('{"valid":false}');
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
    const read = hot().answer(asService(), body(ada.token)); // the revocation cleared the cache: read again
    expect(read).toBeInstanceOf(Promise);
    expect(await read).toBe('{"valid":false}');
    expect((await overHttp(body(ada.token))).body).toEqual({ valid: false });
    expect(hot().answer(asService(), body(ada.token))).toBe('{"valid":false}');

    const bob = await signUp(iam);
    expect((await overHttp(body(bob.token))).body.valid).toBe(true);
    const expiresAt = Date.parse(JSON.parse(hot().answer(asService(), body(bob.token)) as string).principal.expiresAt);
    iam.clock.set(new Date(expiresAt + 1000));
    try {
      expect(hot().answer(asService(), body(bob.token))).toBe('{"valid":false}');
      expect((await overHttp(body(bob.token))).body).toEqual({ valid: false });
    } finally {
      iam.clock.set(new Date());
    }
  });

  it("is handed to listen() by IAM as the launcher builds it (npm start)", async () => {
    const built = await buildService({
      name: "iam",
      common: loadCommonConfig({}),
      db: database.db,
      pingDatabase: database.ping,
      logger: silentLogger(),
      serviceCredentials: new Map(),
      env: { CORE_AUTH_SECRET: TEST_SECRET },
    });
    try {
      expect([...built.hotRoutes!.routes.keys()]).toEqual(["/api/validate-session"]);
    } finally {
      await built.close();
    }
  });
});
