import { describe, expect, it } from "vitest";
import { ErrorCode } from "@modelcontextprotocol/sdk/types.js";
import { errorTextOf, outputOf, servedVault } from "./support/vault-server.js";

const served = servedVault({
  prepare: (files) => {
    // enough documents to exercise the limit bounds
    for (let i = 1; i <= 60; i++) files.write(`implementation/note-${i}.md`, `---\ntitle: Note ${i}\n---\n# Note ${i}\nThe widget pipeline, part ${i}.\n`);
  },
});

const call = (name: string, args: Record<string, unknown> = {}) => served.client.callTool({ name, arguments: args });
const output = async (name: string, args: Record<string, unknown> = {}) => outputOf(await call(name, args));
const toolError = async (name: string, args: Record<string, unknown>) => errorTextOf(await call(name, args));
const invalidParams = (name: string, args: Record<string, unknown>) =>
  expect(call(name, args)).rejects.toMatchObject({ code: ErrorCode.InvalidParams });

describe("search_docs", () => {
  it("ranks a title match above a body mention and gives { path, title, snippet, score }", async () => {
    const results = await output("search_docs", { query: "tenancy" });
    expect(results[0]).toEqual({ path: "concepts/tenancy", title: "Tenancy", snippet: expect.any(String), score: expect.any(Number) });
    expect(results.map((r: { path: string }) => r.path)).toContain("services/iam");
    const scores = results.map((r: { score: number }) => r.score);
    expect(scores).toEqual([...scores].sort((a, b) => b - a));
  });

  it("boosts a heading match over a plain body mention", async () => {
    const results = await output("search_docs", { query: "routes" });
    expect(results[0].path).toBe("services/iam");
  });

  it("matches word prefixes", async () => {
    expect((await output("search_docs", { query: "organiz" })).map((r: { path: string }) => r.path)).toContain("concepts/tenancy");
  });

  it("tolerates a small typo", async () => {
    expect((await output("search_docs", { query: "permisions" }))[0].path).toBe("decisions/0004-permissions");
  });

  it("gives a snippet around the best match", async () => {
    const [first] = await output("search_docs", { query: "dashes" });
    expect(first.path).toBe("concepts/tenancy");
    expect(first.snippet).toContain("dashes");
    expect(first.snippet.length).toBeLessThanOrEqual(202);
  });

  it("filters by category", async () => {
    const results = await output("search_docs", { query: "organizations", category: "services" });
    expect(results.length).toBeGreaterThan(0);
    for (const r of results) expect(r.path).toMatch(/^services\//);
  });

  it("returns an empty array when nothing matches", async () => {
    expect(await output("search_docs", { query: "zzqqxxyy" })).toEqual([]);
  });

  it("returns 10 results by default (spec §8)", async () => {
    expect(await output("search_docs", { query: "widget" })).toHaveLength(10);
  });

  it("accepts limit 1 and 50, the bounds", async () => {
    expect(await output("search_docs", { query: "widget", limit: 1 })).toHaveLength(1);
    expect(await output("search_docs", { query: "widget", limit: 50 })).toHaveLength(50);
  });

  it("refuses limit 0, 51 and 2.5 with invalid params", async () => {
    await invalidParams("search_docs", { query: "widget", limit: 0 });
    await invalidParams("search_docs", { query: "widget", limit: 51 });
    await invalidParams("search_docs", { query: "widget", limit: 2.5 });
  });

  it("refuses a missing or empty query and an unknown category with invalid params", async () => {
    await invalidParams("search_docs", {});
    await invalidParams("search_docs", { query: "  " });
    await invalidParams("search_docs", { query: "x", category: "secrets" });
  });

  it("refuses unknown arguments with invalid params", async () => {
    await invalidParams("search_docs", { query: "x", page: 2 });
  });
});

describe("read_doc", () => {
  it("gives the full content with title, summary, category and front matter", async () => {
    const doc = await output("read_doc", { path: "services/iam" });
    expect(doc).toMatchObject({ path: "services/iam", title: "IAM service", summary: "Identity and access for every tenant.", category: "services" });
    expect(doc.frontMatter).toMatchObject({ service: "iam" });
    expect(doc.content).toContain("## Routes");
    expect(doc.content).not.toContain("summary:");
  });

  it("tolerates the .md extension", async () => {
    expect((await output("read_doc", { path: "services/iam.md" })).path).toBe("services/iam");
  });

  it("gives a tool error naming the missing document", async () => {
    expect(await toolError("read_doc", { path: "services/billing" })).toBe("Document not found: services/billing");
  });

  it("refuses a missing or non-string path with invalid params", async () => {
    await invalidParams("read_doc", {});
    await invalidParams("read_doc", { path: 7 });
    await invalidParams("read_doc", { path: "" });
  });
});

describe("read_section", () => {
  it("returns the section with its sub-sections, up to the next heading of the same level", async () => {
    const section = await output("read_section", { path: "concepts/tenancy", heading: "Organizations" });
    expect(section).toMatchObject({ path: "concepts/tenancy", heading: "Organizations", level: 2 });
    expect(section.content).toContain("### Slugs");
    expect(section.content).toContain("dashes");
    expect(section.content).not.toContain("Members hold roles");
  });

  it("matches a heading partially and case-insensitively", async () => {
    expect((await output("read_section", { path: "concepts/tenancy", heading: "slug" })).heading).toBe("Slugs");
    expect((await output("read_section", { path: "concepts/tenancy", heading: "MEMB" })).content).toContain("Members hold roles");
  });

  it("gives a tool error naming the heading and listing those there are", async () => {
    const message = await toolError("read_section", { path: "concepts/tenancy", heading: "Billing" });
    expect(message).toContain('"Billing"');
    expect(message).toContain("Organizations");
  });

  it("gives a tool error for a missing document", async () => {
    expect(await toolError("read_section", { path: "concepts/nope", heading: "x" })).toBe("Document not found: concepts/nope");
  });

  it("refuses a missing heading argument with invalid params", async () => {
    await invalidParams("read_section", { path: "concepts/tenancy" });
  });
});

describe("get_service_spec and list_services", () => {
  it("gives a service's spec by its name", async () => {
    const spec = await output("get_service_spec", { service: "stack-registry" });
    expect(spec).toMatchObject({ service: "stack-registry", path: "services/stack-registry", title: "Stack registry" });
    expect(spec.content).toContain("immutable versions");
  });

  it("gives a tool error naming an unknown service", async () => {
    expect(await toolError("get_service_spec", { service: "billing" })).toBe("Service not found: billing");
  });

  it("refuses a missing service argument with invalid params", async () => {
    await invalidParams("get_service_spec", {});
  });

  it("lists all services with titles and summaries", async () => {
    expect(await output("list_services")).toEqual([
      { service: "iam", path: "services/iam", title: "IAM service", summary: "Identity and access for every tenant." },
      { service: "stack-registry", path: "services/stack-registry", title: "Stack registry", summary: "Catalogue of stack templates and versions." },
    ]);
  });

  it("refuses arguments it does not take", async () => {
    await invalidParams("list_services", { all: true });
  });
});

describe("get_adr and list_adrs", () => {
  it("gives a decision record with its metadata", async () => {
    const adr = await output("get_adr", { number: 4 });
    expect(adr).toMatchObject({ adr: 4, status: "accepted", date: "2026-11-01", path: "decisions/0004-permissions", title: "ADR 0004: Permissions" });
    expect(adr.content).toContain("Grants expire");
  });

  it("gives a tool error naming a missing number", async () => {
    expect(await toolError("get_adr", { number: 99 })).toBe("ADR not found: 99");
  });

  it("refuses a non-integer or string number with invalid params", async () => {
    await invalidParams("get_adr", { number: 4.5 });
    await invalidParams("get_adr", { number: "4" });
    await invalidParams("get_adr", {});
  });

  it("lists all records in number order", async () => {
    const adrs = await output("list_adrs");
    expect(adrs.map((a: { adr: number; status: string }) => [a.adr, a.status])).toEqual([
      [4, "accepted"],
      [5, "superseded"],
    ]);
  });

  it("filters by status, case-insensitively", async () => {
    expect((await output("list_adrs", { status: "Superseded" })).map((a: { adr: number }) => a.adr)).toEqual([5]);
    expect(await output("list_adrs", { status: "proposed" })).toEqual([]);
  });
});

describe("get_rules and get_rules_by_tier", () => {
  it("gives the rules of a domain with tier and content", async () => {
    const rules = await output("get_rules", { domain: "security" });
    expect(rules).toEqual([expect.objectContaining({ path: "rules/security-secrets", domain: "security", tier: 1, content: expect.stringContaining("Redact") })]);
  });

  it("gives a tool error naming a domain without rules", async () => {
    expect(await toolError("get_rules", { domain: "cooking" })).toBe("No rules found for domain: cooking");
  });

  it("gives the rules of a tier, 1 and 4 being the bounds", async () => {
    expect((await output("get_rules_by_tier", { tier: 3 })).map((r: { path: string }) => r.path)).toEqual(["rules/typescript-strict"]);
    expect((await output("get_rules_by_tier", { tier: 1 })).map((r: { path: string }) => r.path)).toEqual(["rules/security-secrets"]);
    expect(await output("get_rules_by_tier", { tier: 4 })).toEqual([]);
  });

  it("refuses tiers 0, 5 and 1.5 with invalid params", async () => {
    await invalidParams("get_rules_by_tier", { tier: 0 });
    await invalidParams("get_rules_by_tier", { tier: 5 });
    await invalidParams("get_rules_by_tier", { tier: 1.5 });
  });
});

describe("get_cross_cutting", () => {
  it("lists all concerns when none is named", async () => {
    expect(await output("get_cross_cutting")).toEqual([{ concern: "errors", path: "cross-cutting/errors", title: "Errors", summary: "One error envelope." }]);
  });

  it("gives the doc of one concern", async () => {
    expect(await output("get_cross_cutting", { concern: "errors" })).toMatchObject({ concern: "errors", content: expect.stringContaining("envelope") });
  });

  it("gives a tool error naming a missing concern", async () => {
    expect(await toolError("get_cross_cutting", { concern: "caching" })).toBe("Cross-cutting concern not found: caching");
  });
});

describe("get_links", () => {
  it("gives outbound links with titles, headings, aliases, and broken ones as such", async () => {
    const links = await output("get_links", { path: "services/iam" });
    expect(links.outbound).toEqual([
      { direction: "outbound", path: "decisions/0004-permissions", title: "ADR 0004: Permissions", broken: false },
      { direction: "outbound", path: "concepts/tenancy", title: "Tenancy", alias: "the tenancy concept", broken: false },
      { direction: "outbound", path: "concepts/tenancy", title: "Tenancy", heading: "Slugs", broken: false },
      { direction: "outbound", path: "services/nowhere", title: null, broken: true },
    ]);
    expect(links.inbound).toEqual([{ direction: "inbound", path: "services/stack-registry", title: "Stack registry" }]);
  });

  it("gives inbound links of a linked document", async () => {
    const links = await output("get_links", { path: "concepts/tenancy" });
    expect(links.inbound).toEqual([{ direction: "inbound", path: "services/iam", title: "IAM service" }]);
    expect(links.outbound).toEqual([]);
  });

  it("gives a tool error naming a missing document", async () => {
    expect(await toolError("get_links", { path: "services/nowhere" })).toBe("Document not found: services/nowhere");
  });
});
