import { describe, expect, it } from "vitest";
import { parseDocument } from "../src/documents.js";
import { DocumentIndex } from "../src/document-index.js";
import { FullTextIndex, termsOf, type Field } from "../src/full-text.js";

const fields = (partial: Partial<Record<Field, string>>): Record<Field, string> => ({ title: "", headings: "", summary: "", body: "", ...partial });

function indexOf(docs: Record<string, Partial<Record<Field, string>>>): FullTextIndex {
  const index = new FullTextIndex();
  for (const [id, doc] of Object.entries(docs)) index.add(id, fields(doc));
  return index;
}
const ids = (index: FullTextIndex, query: string, limit = 10) => index.search(query, limit).hits.map((hit) => hit.id);

describe("words", () => {
  it("are runs of letters and digits in lower case, stop words left out", () => {
    expect(termsOf("The Zürich-based API_v2 is in `core.json`, isn't it?")).toEqual(["zürich", "based", "api", "v2", "core", "json", "isn", "t"]);
  });

  it("a query of stop words alone finds nothing", () => {
    const index = indexOf({ a: { body: "the cat and the hat" } });
    expect(ids(index, "the and")).toEqual([]);
    expect(ids(index, "the cat")).toEqual(["a"]);
  });
});

describe("BM25 ranking", () => {
  it("ranks a title match above the same word in the body", () => {
    const index = indexOf({ body: { title: "Overview", body: "tenancy explained" }, title: { title: "Tenancy", body: "explained" } });
    expect(ids(index, "tenancy")).toEqual(["title", "body"]);
  });

  it("ranks a heading match above a body match, and a summary match above a body match", () => {
    const index = indexOf({ body: { body: "about grants" }, heading: { headings: "Grants", body: "about" }, summary: { summary: "grants", body: "about" } });
    expect(ids(index, "grants")).toEqual(["heading", "summary", "body"]);
  });

  it("weighs a rare word more than a common one", () => {
    const docs: Record<string, Partial<Record<Field, string>>> = { rare: { body: "quokka filler" }, common: { body: "service filler" } };
    for (let i = 0; i < 20; i++) docs[`other${i}`] = { body: "service elsewhere" };
    expect(ids(indexOf(docs), "quokka service", 1)).toEqual(["rare"]);
  });

  it("prefers the shorter of two documents that use a word equally often", () => {
    const index = indexOf({ long: { body: `audit ${"words ".repeat(200)}` }, short: { body: "audit trail" } });
    expect(ids(index, "audit")).toEqual(["short", "long"]);
  });

  it("ranks a document with more of the query's words higher", () => {
    const index = indexOf({ one: { body: "device login" }, both: { body: "device login refresh rotation" } });
    expect(ids(index, "refresh rotation device")[0]).toBe("both");
  });

  it("orders equal scores by id, so results are stable", () => {
    const index = indexOf({ b: { body: "same words" }, a: { body: "same words" }, c: { body: "same words" } });
    expect(ids(index, "same")).toEqual(["a", "b", "c"]);
  });
});

describe("completions and typos", () => {
  const index = indexOf({ perms: { body: "permissions are granted" }, slug: { body: "slug rules" }, refresh: { body: "refreshing tokens" } });

  it("completes a word begun with three letters or more, below the whole word", () => {
    expect(ids(index, "permis")).toEqual(["perms"]);
    expect(ids(index, "sl")).toEqual([]); // two letters complete nothing
    const whole = indexOf({ exact: { body: "grant" }, longer: { body: "granted" } });
    expect(ids(whole, "grant")).toEqual(["exact", "longer"]);
  });

  it("forgives one typo in five letters or more, and two from ten", () => {
    expect(ids(index, "permisions")).toEqual(["perms"]); // one letter missing
    expect(ids(index, "grented")).toEqual(["perms"]);
    expect(ids(index, "refreshnig")).toEqual(["refresh"]); // two swapped letters: two edits at ten letters
    expect(ids(index, "slog")).toEqual([]); // four letters: no typo allowed
  });

  it("names the indexed words a query matched, its own first", () => {
    const { terms } = indexOf({ a: { body: "grant granted grants" } }).search("grant", 10);
    expect(terms[0]).toBe("grant");
    expect(terms).toEqual(expect.arrayContaining(["granted", "grants"]));
  });
});

describe("limits, filters and changes", () => {
  it("returns at most `limit` hits and filters before they compete", () => {
    const docs: Record<string, Partial<Record<Field, string>>> = {};
    for (let i = 0; i < 30; i++) docs[`doc${String(i).padStart(2, "0")}`] = { body: `topic ${"x ".repeat(i)}` };
    const index = indexOf(docs);
    expect(index.search("topic", 5).hits).toHaveLength(5);
    const odd = index.search("topic", 5, (id) => Number(id.slice(3)) % 2 === 1).hits.map((hit) => hit.id);
    expect(odd).toEqual(["doc01", "doc03", "doc05", "doc07", "doc09"]);
  });

  it("forgets a removed document and replaces one added again under the same id", () => {
    const index = indexOf({ a: { body: "wombat" }, b: { body: "wombat numbat" } });
    index.remove("a");
    expect(ids(index, "wombat")).toEqual(["b"]);
    index.add("b", fields({ body: "only numbat now" }));
    expect(ids(index, "wombat")).toEqual([]);
    expect(ids(index, "numbat")).toEqual(["b"]);
    expect(index.size).toBe(1);
  });

  it("says a rebuild is due once removed documents outnumber live ones, and the vault index rebuilds", () => {
    const documents = Array.from({ length: 1_200 }, (_, i) => parseDocument(`concepts/doc${i}`, `# Doc ${i}\nshared words and marker${i}`));
    const index = DocumentIndex.of(documents);
    for (let i = 0; i < 1_150; i++) index.remove(`concepts/doc${i}`);
    expect(index.size).toBe(50);
    expect(index.search("marker1199", 10)[0]!.path).toBe("concepts/doc1199");
    expect(index.search("marker5", 10)).toEqual([]);
    expect(index.search("shared", 100)).toHaveLength(50);
    const raw = new FullTextIndex();
    for (let i = 0; i < 1_200; i++) raw.add(`d${i}`, fields({ body: "x" }));
    for (let i = 0; i < 1_001; i++) raw.remove(`d${i}`);
    expect(raw.wasteful).toBe(true);
  });
});
