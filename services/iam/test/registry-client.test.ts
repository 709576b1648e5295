import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { RegistryClient } from "../src/registry-client.js";

/**
 * IAM's calls to the platform registry over real HTTP, against a registry that drops the connection
 * of the next requests it is told to: a reset read is asked again once, a write never is (a
 * platform created twice would be worse than an org set-up left for its recovery).
 */
describe("RegistryClient when the registry resets the connection", () => {
  let server: Server;
  let client: RegistryClient;
  let requests: string[] = [];
  let resetNext = 0;

  beforeAll(async () => {
    server = createServer((req, res) => {
      requests.push(req.method!);
      if (resetNext > 0) {
        resetNext--;
        req.socket.destroy();
        return;
      }
      const platform = { id: "plt_1", name: "Acme", slug: "acme", status: "active", tier: "free" };
      res.writeHead(req.method === "POST" ? 201 : 200, { "content-type": "application/json" });
      res.end(JSON.stringify(req.method === "GET" ? { data: [platform] } : platform));
    });
    await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
    client = new RegistryClient(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, { tokenFor: async () => "service-token" });
  });
  afterAll(() => new Promise<void>((done) => server.close(() => done())));
  beforeEach(() => {
    requests = [];
  });

  it("asks a lookup again once and answers it", async () => {
    resetNext = 1;
    expect((await client.findPlatformBySlug("acme"))?.id).toBe("plt_1");
    expect(requests).toEqual(["GET", "GET"]);
  });

  it("answers 503 when the lookup's second try is reset too", async () => {
    resetNext = 2;
    await expect(client.findPlatformBySlug("acme")).rejects.toMatchObject({ status: 503, code: "UPSTREAM_UNAVAILABLE" });
    expect(requests).toEqual(["GET", "GET"]);
  });

  it("never sends a create again", async () => {
    resetNext = 1;
    await expect(client.createPlatform({ name: "Acme", slug: "acme", tier: "free" })).rejects.toMatchObject({ status: 503 });
    expect(requests).toEqual(["POST"]);
    expect((await client.createPlatform({ name: "Acme", slug: "acme", tier: "free" })).id).toBe("plt_1");
  });
});
