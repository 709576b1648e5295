import { describe, expect, it } from "vitest";
import { ConfigError, createServiceApp, clientIpOf, forwardedClient, silentLogger, trustedProxyHops } from "@core/kit";

describe("CORE_TRUST_PROXY", () => {
  it("is the number of proxies in front: unset, empty and 0 mean none", () => {
    expect(trustedProxyHops({})).toBe(0);
    expect(trustedProxyHops({ CORE_TRUST_PROXY: "" })).toBe(0);
    expect(trustedProxyHops({ CORE_TRUST_PROXY: "0" })).toBe(0);
    expect(trustedProxyHops({ CORE_TRUST_PROXY: "1" })).toBe(1);
    expect(trustedProxyHops({ CORE_TRUST_PROXY: "2" })).toBe(2);
  });

  it("refuses anything else with a ConfigError naming the variable and the value", () => {
    for (const value of ["true", "yes", "-1", "1.5", "17", "1e1", "0x1", "one", "999"]) {
      expect(() => trustedProxyHops({ CORE_TRUST_PROXY: value }), value).toThrow(ConfigError);
      expect(() => trustedProxyHops({ CORE_TRUST_PROXY: value }), value).toThrow(`CORE_TRUST_PROXY must be the number of proxies in front of the service, 0 to 16, got "${value}"`);
    }
  });
});

describe("the client address behind proxies", () => {
  it("is the entry the first trusted proxy wrote, counted from the right; what the client wrote is never read", () => {
    expect(forwardedClient("spoofed, real", 1, "10.0.0.1")).toBe("real");
    expect(forwardedClient("real", 1, "10.0.0.1")).toBe("real");
    expect(forwardedClient("spoofed, real, proxy-one", 2, "10.0.0.2")).toBe("real");
    expect(forwardedClient("a,b,c,real,p1,p2", 3, "10.0.0.3")).toBe("real");
    // several header lines arrive joined with ", "
    expect(forwardedClient("spoofed-1, spoofed-2, real", 1, "10.0.0.1")).toBe("real");
  });

  it("is the leftmost entry when the request met fewer proxies than trusted, and the socket's without any", () => {
    expect(forwardedClient("only", 3, "10.0.0.1")).toBe("only");
    expect(forwardedClient("first, second", 3, "10.0.0.1")).toBe("first");
    expect(forwardedClient(undefined, 2, "10.0.0.1")).toBe("10.0.0.1");
    expect(forwardedClient("", 2, "10.0.0.1")).toBe("10.0.0.1");
    expect(forwardedClient(" , ", 1, "10.0.0.1")).toBe("10.0.0.1");
  });

  it("is the socket's with no proxy trusted, whatever the header says", () => {
    expect(forwardedClient("spoofed, real", 0, "10.0.0.1")).toBe("10.0.0.1");
  });

  it("is read from the request once", async () => {
    const app = createServiceApp({ service: "kit-test", title: "t", logger: silentLogger() });
    app.get("/ip", (c) => c.json({ one: clientIpOf(c, 0), trusted: clientIpOf(c, 1) }));
    const answer = await app.request("/ip", { headers: { "x-forwarded-for": "spoofed, 203.0.113.7" } });
    // memoized: the first reading stands for the whole request
    expect(await answer.json()).toEqual({ one: "127.0.0.1", trusted: "127.0.0.1" });
    const other = createServiceApp({ service: "kit-test", title: "t", logger: silentLogger() });
    other.get("/ip", (c) => c.json({ ip: clientIpOf(c, 1) }));
    expect(await (await other.request("/ip", { headers: { "x-forwarded-for": "spoofed, 203.0.113.7" } })).json()).toEqual({ ip: "203.0.113.7" });
  });
});
