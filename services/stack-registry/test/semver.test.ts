import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { byPrecedenceDescending, compareVersions, isStackVersion, latestOf, STRICT_SEMVER_PATTERN } from "../src/semver.js";

/** semver.org §11's own examples, each chain in ascending precedence. */
const CHAINS = [
  ["1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2", "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0"],
  ["1.0.0", "2.0.0", "2.1.0", "2.1.1"],
  ["1.9.0", "1.10.0", "1.11.0"],
];
const PAIRS = CHAINS.flatMap((chain) => chain.slice(1).map((higher, i) => [chain[i]!, higher] as const));

describe("semver.org precedence", () => {
  it.each(PAIRS)("%s < %s", (lower, higher) => {
    expect(compareVersions(lower, higher)).toBe(-1);
    expect(compareVersions(higher, lower)).toBe(1);
  });

  it("sorts every chain, shuffled, highest first", () => {
    for (const chain of CHAINS) {
      const shuffled = [...chain].reverse().map((version, i) => ({ version, i })).sort((a, b) => (a.i * 7) % 5 - (b.i * 7) % 5);
      expect(byPrecedenceDescending(shuffled).map((v) => v.version)).toEqual([...chain].reverse());
    }
  });
});

describe("accepted version strings (spec §9 pattern, narrowed by semver.org)", () => {
  it.each(["0.0.0", "1.2.3", "10.20.30", "1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-0.3.7", "1.0.0-x.7.z.92", "1.0.0-rc.1", "1.0.0-A1b2"])(
    "accepts %s",
    (v) => expect(isStackVersion(v)).toBe(true),
  );
  it.each([
    ["1.0", "two numbers"],
    ["1.0.0.0", "four numbers"],
    ["v1.0.0", "a prefix"],
    ["1.0.0+build.1", "build metadata, outside the spec's pattern"],
    ["1.0.0-", "an empty pre-release"],
    ["1.0.0-alpha_1", "an underscore"],
    ["01.0.0", "a leading zero (pattern yes, semver.org no)"],
    ["1.0.0-01", "a numeric pre-release identifier with a leading zero"],
    ["1.0.0-a..b", "an empty identifier"],
    ["1.0.0-a.", "a trailing dot"],
    ["", "nothing"],
  ])("refuses %s (%s)", (v) => expect(isStackVersion(v)).toBe(false));

  it("accepts 64 characters and refuses 65", () => {
    const at = (n: number) => `1.0.0-${"a".repeat(n - 6)}`;
    expect(isStackVersion(at(64))).toBe(true);
    expect(isStackVersion(at(65))).toBe(false);
  });
});

describe("the latest version", () => {
  const v = (version: string, status = "active") => ({ version, status });
  it("is the highest release, above any higher pre-release", () => {
    expect(latestOf([v("1.0.0"), v("2.0.0-rc.1"), v("1.10.0"), v("1.9.0")])?.version).toBe("1.10.0");
  });
  it("skips deprecated versions", () => {
    expect(latestOf([v("1.0.0"), v("1.1.0", "deprecated")])?.version).toBe("1.0.0");
  });
  it("falls back to the highest pre-release only when no release is live", () => {
    expect(latestOf([v("1.0.0-beta.2"), v("1.0.0-beta.11"), v("0.9.0", "deprecated")])?.version).toBe("1.0.0-beta.11");
  });
  it("is nothing when every version is deprecated, or there are none", () => {
    expect(latestOf([v("1.0.0", "deprecated")])).toBeUndefined();
    expect(latestOf([])).toBeUndefined();
  });
});

describe("the pattern the descriptions publish", () => {
  // strings of the spec's alphabet, shaped like versions often enough to reach every rule
  const piece = fc.oneof(fc.constantFrom("0", "00", "01", "1", "10", "a", "0a", "A1", ""), fc.stringMatching(/^[0-9a-zA-Z]{0,4}$/));
  const candidate = fc
    .tuple(piece, piece, piece, fc.option(fc.array(piece, { minLength: 1, maxLength: 4 })))
    .map(([major, minor, patch, pre]) => `${major}.${minor}.${patch}${pre ? `-${pre.join(".")}` : ""}`);

  it("accepts exactly the versions the registry accepts (spec §9 narrowed by the semver package)", () => {
    fc.assert(
      fc.property(fc.oneof(candidate, fc.stringMatching(/^[0-9a-zA-Z.-]{0,20}$/)), (version) => {
        expect(STRICT_SEMVER_PATTERN.test(version)).toBe(isStackVersion(version));
      }),
      { numRuns: 5000, seed: 20261123 },
    );
  });
});
