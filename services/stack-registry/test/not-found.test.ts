import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listen, type RunningServer } from "@core/kit";
import { testDatabases } from "@core/storage";
import { startStackRegistry } from "./support/stack-registry.js";

/**
 * The stack registry's 404s (docs/vault/cross-cutting/security.md, "404s name nothing the caller
 * does not own"). Its catalogue belongs to no tenant and every credential reads it, so a 404 may
 * name the template or version the caller asked for, in the caller's own words, and nothing else:
 * no id of any record, nothing of another template. Over real HTTP.
 */
describe.each(testDatabases())("the stack registry's 404s on $name", (database) => {
  let r: Awaited<ReturnType<typeof startStackRegistry>>;
  let server: RunningServer;
  const get = async (path: string, headers: Record<string, string>) => {
    const res = await fetch(`${server.url}${path}`, { headers });
    return { status: res.status, text: await res.text() };
  };
  beforeAll(async () => {
    r = await startStackRegistry(database);
    server = await listen(r.app, 0, "127.0.0.1");
  });
  afterAll(async () => {
    await server?.close();
    await r?.close();
  });

  it("an unknown template or version names only what was asked for, never a record's id", async () => {
    const template = await r.createTemplate();
    const reader = r.as.member();
    const missing = await get("/api/v1/stacks/no-such-stack", reader);
    expect(missing.status).toBe(404);
    expect(JSON.parse(missing.text).error).toMatchObject({ code: "TEMPLATE_NOT_FOUND", message: 'No stack template named "no-such-stack"', details: null });
    for (const path of [`/api/v1/stacks/${template.name}/9.9.9`, `/api/v1/stacks/no-such-stack/versions`, `/api/v1/stacks/no-such-stack/1.0.0`]) {
      const answer = await get(path, reader);
      expect(answer.status, path).toBe(404);
      expect(answer.text, path).not.toContain(template.id);
      expect(answer.text, path).not.toMatch(/\b(tpl|ver)_[a-z0-9]{8,}/);
    }
    expect(JSON.parse((await get(`/api/v1/stacks/${template.name}/9.9.9`, reader)).text).error.message).toBe(`Stack template "${template.name}" has no version 9.9.9`);
  });
});
