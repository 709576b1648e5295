import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PlatformDirectory } from "../src/access.js";
import { platformsKnown } from "../src/metering/ingest.js";

/**
 * A batch of usage events may name up to 1000 platforms: ingestion asks the platform registry about
 * them a few at a time, never all at once. A registry over real HTTP counts the lookups in flight.
 */
describe("platform lookups of one batch", () => {
  let server: Server;
  let url: string;
  let inFlight = 0;
  let mostInFlight = 0;
  const asked: string[] = [];

  beforeAll(async () => {
    server = createServer((req, res) => {
      inFlight++;
      mostInFlight = Math.max(mostInFlight, inFlight);
      const id = decodeURIComponent(req.url!.replace("/platforms/", ""));
      asked.push(id);
      // answers after a moment, so lookups sent together overlap
      setTimeout(() => {
        inFlight--;
        res.writeHead(id.startsWith("plt_real") ? 200 : 404, { "content-type": "application/json" }).end("{}");
      }, 5);
    });
    await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((done) => server.close(() => done())));

  it("asks about 200 platforms at most 16 at a time, each once, and answers every one", async () => {
    const directory = new PlatformDirectory(url, { tokenFor: async () => "service-token" });
    const ids = Array.from({ length: 200 }, (_, i) => (i % 10 === 0 ? `plt_real${i}` : `plt_gone${i}`));
    const known = await platformsKnown(directory, ids);
    expect(mostInFlight).toBeGreaterThan(1);
    expect(mostInFlight).toBeLessThanOrEqual(16);
    expect(asked.sort()).toEqual([...ids].sort());
    expect([...known.entries()].filter(([, exists]) => exists).map(([id]) => id)).toEqual(ids.filter((id) => id.startsWith("plt_real")));
    expect(known.size).toBe(200);
  });
});

/**
 * The registry closing a kept-alive connection just as it is reused fails the request at once: the
 * lookup is a read, so it is asked once more; a registry that does not answer in time is not.
 */
describe("a platform lookup whose connection is reset", () => {
  let server: Server;
  let url: string;
  let requests = 0;
  let resetNext = 0;

  beforeAll(async () => {
    server = createServer((req, res) => {
      requests++;
      if (resetNext > 0) {
        resetNext--;
        req.socket.destroy();
        return;
      }
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
    await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((done) => server.close(() => done())));

  const directory = () => new PlatformDirectory(url, { tokenFor: async () => "service-token" });

  it("is asked again once and answers", async () => {
    requests = 0;
    resetNext = 1;
    expect(await directory().exists("plt_a")).toBe(true);
    expect(requests).toBe(2);
  });

  it("answers 503 when the second try fails too, after exactly two tries", async () => {
    requests = 0;
    resetNext = 2;
    await expect(directory().exists("plt_b")).rejects.toMatchObject({ status: 503, code: "UPSTREAM_UNAVAILABLE" });
    expect(requests).toBe(2);
  });

  it("is not asked again after a timeout", async () => {
    let calls = 0;
    const timingOut = (async () => {
      calls++;
      throw new DOMException("The operation was aborted due to timeout", "TimeoutError");
    }) as unknown as typeof fetch;
    const slow = new PlatformDirectory(url, { tokenFor: async () => "service-token" }, timingOut);
    await expect(slow.exists("plt_c")).rejects.toMatchObject({ status: 503 });
    expect(calls).toBe(1);
  });
});
