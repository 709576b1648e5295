import { describe, expect, it } from "vitest";
import { parseDocument } from "../src/documents.js";
import { plainTextOf, snippetOf } from "../src/document-index.js";

const doc = (body: string, summary = "") => parseDocument("concepts/example", `---\ntitle: Example\nsummary: ${summary || "none"}\n---\n${body}`);
const filler = (words: number) => Array.from({ length: words }, (_, i) => `word${i}`).join(" ");

describe("snippets", () => {
  it("show running text: no heading marks, emphasis, code ticks or link syntax", () => {
    expect(plainTextOf("# Title\n\n**Bold** and `code` see [[services/iam|IAM]], [[concepts/tenancy]] and [the spec](https://example.test/x).\n```ts\nconst a = 1;\n```")).toBe(
      "Title Bold and code see IAM, concepts/tenancy and the spec. const a = 1;",
    );
  });

  it("centre on the place where the most query terms meet, not the first mention", () => {
    const body = `${filler(10)} grants appear here alone. ${filler(80)} grants expire when their expiry passes. ${filler(80)}`;
    const snippet = snippetOf(doc(body), ["grants", "expire"]);
    expect(snippet).toContain("grants expire when their expiry passes");
    expect(snippet.startsWith("…")).toBe(true);
    expect(snippet.endsWith("…")).toBe(true);
    expect(snippet.length).toBeLessThanOrEqual(202);
  });

  it("match terms at the start of words only", () => {
    const body = `${filler(5)} metadata everywhere. ${filler(60)} data lives here. ${filler(60)}`;
    expect(snippetOf(doc(body), ["data"])).toContain("data lives here");
  });

  it("start at the beginning without an ellipsis when the match is near the top", () => {
    const snippet = snippetOf(doc(`Tenancy first. ${filler(100)}`), ["tenancy"]);
    expect(snippet.startsWith("Tenancy first.")).toBe(true);
    expect(snippet.endsWith("…")).toBe(true);
  });

  it("leave out the H1 that repeats the title", () => {
    const document = parseDocument("guides/quokka", "---\ntitle: Quokka notes\n---\n\n# Quokka notes\n\nThe quokka smiles.\n");
    expect(snippetOf(document, ["quokka"])).toBe("The quokka smiles.");
    const other = parseDocument("guides/other", "---\ntitle: Other\n---\n\n# Quokka heading\n\nText.\n");
    expect(snippetOf(other, ["quokka"])).toBe("Quokka heading Text.");
  });

  it("fall back to the summary when the match was only in the title or front matter", () => {
    expect(snippetOf(doc("Nothing relevant.", "The summary line."), ["quokka"])).toBe("The summary line.");
  });

  it("cut whole words", () => {
    const snippet = snippetOf(doc(`${filler(100)} target ${filler(100)}`), ["target"]);
    const words = snippet.replace(/…/g, "").split(" ");
    expect(words.every((w) => /^(word\d+|target)$/.test(w))).toBe(true);
  });

  it("read only the lines around the match of a long document, without their markup", () => {
    const lines = Array.from({ length: 300 }, (_, i) => `Line ${i} says ${filler(12)}.`);
    lines[250] = "## Refresh **tokens** rotate";
    lines[251] = "A spent `refresh` token revokes its family ([[decisions/0007-device-flow|ADR 0007]]).";
    const snippet = snippetOf(doc(lines.join("\n")), ["refresh", "family"]);
    expect(snippet.startsWith("…")).toBe(true);
    expect(snippet).toContain("Refresh tokens rotate A spent refresh token revokes its family (ADR 0007).");
    expect(snippet).not.toMatch(/[#*`[\]]/);
  });
});
