import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listen, type RunningServer } from "@core/kit";
import { testDatabases } from "@core/storage";
import { startRegistry, type Headers, type Registry } from "./support/registry.js";

/**
 * Refusals name nothing the caller does not own (docs/vault/cross-cutting/security.md): a member
 * asking for another tenant's platform is refused before it is looked up, in the words a made-up id
 * gets; a stack of another platform asked for under one's own is 404 naming neither it nor its
 * platform; a 404 names the kind of what was not found, never its id. Over real HTTP.
 */
describe.each(testDatabases())("the platform registry's refusals name nothing of another tenant on $name", (database) => {
  let r: Registry;
  let server: RunningServer;
  const send = async (method: string, path: string, headers: Headers, body?: unknown) => {
    const res = await fetch(`${server.url}${path}`, { method, headers: { ...headers, ...(body === undefined ? {} : { "content-type": "application/json" }) }, body: body === undefined ? undefined : JSON.stringify(body) });
    return { status: res.status, text: await res.text() };
  };
  beforeAll(async () => {
    r = await startRegistry(database);
    server = await listen(r.app, 0, "127.0.0.1");
  });
  afterAll(async () => {
    await server?.close();
    await r?.close();
  });

  it("another tenant's platform: refused before it is looked up, as a made-up one, with nothing of its own", async () => {
    const mine = await r.createPlatform();
    const theirs = await r.createPlatform({ name: "Their Secret Project" });
    const member = r.as.member(mine.id, ["platform:read", "platform:write"]);
    for (const [method, path, body] of [
      ["GET", `/platforms/${theirs.id}`],
      ["PATCH", `/platforms/${theirs.id}`, { name: "Mine now" }],
      ["GET", `/platforms/${theirs.id}/stacks`],
      ["POST", `/platforms/${theirs.id}/stacks`, { tenantId: "t1", name: "mine" }],
    ] as [string, string, unknown?][]) {
      const foreign = await send(method, path, member, body);
      expect(foreign.status, `${method} ${path}: ${foreign.text}`).toBe(403);
      for (const own of [theirs.slug, theirs.name]) expect(foreign.text).not.toContain(own);
      // the 403 says which permission on the platform the caller named, whatever that platform is
      const madeUp = await send(method, path.replace(theirs.id, "plt_madeup000000"), member, body);
      expect(madeUp.status).toBe(403);
      expect(JSON.parse(madeUp.text).error.message.replace("plt_madeup000000", "{id}")).toBe(JSON.parse(foreign.text).error.message.replace(theirs.id, "{id}"));
    }
  });

  it("another platform's stack under one's own: 404 naming neither, as a made-up one", async () => {
    const mine = await r.createPlatform();
    const theirs = await r.createPlatform();
    const theirStack = await r.createStack(theirs.id);
    const member = r.as.member(mine.id, ["platform:read", "platform:write"]);
    for (const [method, body] of [["GET"], ["PATCH", { isDefault: true }], ["DELETE"]] as [string, unknown?][]) {
      const foreign = await send(method, `/platforms/${mine.id}/stacks/${theirStack.id}`, member, body);
      expect(foreign.status, `${method}: ${foreign.text}`).toBe(404);
      expect(foreign.text).not.toContain(theirStack.id);
      expect(foreign.text).not.toContain(theirs.id);
      expect(JSON.parse(foreign.text).error).toMatchObject({ code: "NOT_FOUND", message: "No such stack", details: null });
      const madeUp = await send(method, `/platforms/${mine.id}/stacks/stk_madeup000000`, member, body);
      expect(madeUp.text).not.toContain("stk_madeup000000");
      expect(JSON.parse(madeUp.text).error.message).toBe("No such stack");
    }
  });

  it("an unknown platform, asked for by those who see every platform: by its kind only", async () => {
    for (const headers of [await r.as.service(), r.as.operator()]) {
      const answer = await send("GET", "/platforms/plt_madeup000000", headers);
      expect(answer.status).toBe(404);
      expect(answer.text).not.toContain("plt_madeup000000");
      expect(JSON.parse(answer.text).error.message).toBe("No such platform");
    }
  });
});
