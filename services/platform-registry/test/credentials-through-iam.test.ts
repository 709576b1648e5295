import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabases, type DatabaseHandle } from "@core/storage";
import { call, operator, serviceToken, startIamAndRegistry } from "../../iam/test/support/harness.js";

/**
 * What a registry answers for credentials and inputs IAM refuses, end to end through a real IAM:
 * a refused credential is a 401, never an outage, and IAM's relay to the registry refuses U+0000
 * itself instead of passing on the registry's failure.
 */
describe.each(testDatabases())("credentials and inputs through a real IAM on $name", ({ open }) => {
  let database: DatabaseHandle;
  let running: Awaited<ReturnType<typeof startIamAndRegistry>>;
  beforeAll(async () => {
    database = await open();
    running = await startIamAndRegistry(database);
  });
  afterAll(async () => {
    await running?.close();
    await database?.close();
  });

  const platforms = (headers: Record<string, string>) => fetch(`${running.registryUrl}/platforms`, { headers });

  it.each([
    ["a bearer token of 1,024 characters", { authorization: `Bearer ${"t".repeat(1024)}` }],
    ["a bearer token of 600 characters", { authorization: `Bearer ${"t".repeat(600)}` }],
    ["an x-api-key of 1,024 characters", { "x-api-key": `core_${"k".repeat(1019)}` }],
    ["an x-api-key of 8,000 characters", { "x-api-key": "k".repeat(8000) }],
  ])("answers 401 UNAUTHENTICATED, not 503, for %s", async (_, headers) => {
    const res = await platforms(headers);
    expect(res.status).toBe(401);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe("UNAUTHENTICATED");
  });

  it("refuses a NUL in the platformId of /internal/platform-status with 400 naming it, at IAM", async () => {
    const op = await operator(running.iam);
    const r = await call(running.iam, "POST", "/internal/platform-status", { token: op.token, body: { platformId: "plt_a\u0000b", status: "suspended" } });
    expect(r.status).toBe(400);
    expect(r.body.error).toMatchObject({ code: "VALIDATION_ERROR", details: [expect.objectContaining({ path: "platformId" })] });
    const byService = await call(running.iam, "POST", "/internal/platform-status", { token: await serviceToken(running.iam), body: { platformId: "\u0000", status: "active" } });
    expect(byService.status).toBe(400);
  });
});
