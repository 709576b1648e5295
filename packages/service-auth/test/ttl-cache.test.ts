import { describe, expect, it } from "vitest";
import { TtlCache } from "@core/service-auth";

/** A cache on a clock the test moves by hand. */
function cacheAt(maxEntries = 100) {
  let now = 1_000_000;
  const cache = new TtlCache<string | null>(maxEntries, () => now);
  return { cache, advance: (ms: number) => void (now += ms) };
}

describe("TtlCache", () => {
  it("answers a value until its time to live has passed, and not at the instant it ends", () => {
    const { cache, advance } = cacheAt();
    cache.set("a", "alpha", 5_000);
    advance(4_999);
    expect(cache.get("a")).toBe("alpha");
    advance(1);
    expect(cache.get("a")).toBeUndefined();
  });

  it("keeps a negative answer (null) apart from a miss (undefined)", () => {
    const { cache, advance } = cacheAt();
    cache.set("unknown", null, 1_000);
    expect(cache.get("unknown")).toBeNull();
    expect(cache.get("never-set")).toBeUndefined();
    advance(1_000);
    expect(cache.get("unknown")).toBeUndefined();
  });

  it("stores nothing for a time to live of zero", () => {
    const { cache } = cacheAt();
    cache.set("a", "alpha", 0);
    expect(cache.get("a")).toBeUndefined();
  });

  it("restarts the time to live when a key is set again", () => {
    const { cache, advance } = cacheAt();
    cache.set("a", "old", 1_000);
    advance(900);
    cache.set("a", "new", 1_000);
    advance(900);
    expect(cache.get("a")).toBe("new");
  });

  it("holds at most maxEntries, dropping the oldest first", () => {
    const { cache } = cacheAt(3);
    cache.set("a", "1", 60_000);
    cache.set("b", "2", 60_000);
    cache.set("c", "3", 60_000);
    expect(["a", "b", "c"].map((k) => cache.get(k))).toEqual(["1", "2", "3"]);
    cache.set("d", "4", 60_000);
    expect(["a", "b", "c", "d"].map((k) => cache.get(k))).toEqual([undefined, "2", "3", "4"]);
  });

  it("counts a re-set key as the newest, so it outlives older ones", () => {
    const { cache } = cacheAt(2);
    cache.set("a", "1", 60_000);
    cache.set("b", "2", 60_000);
    cache.set("a", "1b", 60_000);
    cache.set("c", "3", 60_000);
    expect(cache.get("a")).toBe("1b");
    expect(cache.get("b")).toBeUndefined();
    expect(cache.get("c")).toBe("3");
  });

  it("forgets entries by key, by value and all at once", () => {
    const { cache } = cacheAt();
    cache.set("s1", "session-1", 60_000);
    cache.set("s2", "session-1", 60_000);
    cache.set("s3", "session-2", 60_000);
    cache.delete("s3");
    expect(cache.get("s3")).toBeUndefined();
    cache.set("s3", "session-2", 60_000);
    cache.deleteWhere((v) => v === "session-1");
    expect([cache.get("s1"), cache.get("s2"), cache.get("s3")]).toEqual([undefined, undefined, "session-2"]);
    cache.clear();
    expect(cache.get("s3")).toBeUndefined();
  });
});
