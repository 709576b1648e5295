import { describe, expect, it } from "vitest";
import { parseDocument, wikiLinksOf } from "../src/documents.js";

describe("wikilinks", () => {
  it("read the four forms, trimmed, with a leading ./ or a trailing .md dropped", () => {
    expect(wikiLinksOf("[[services/iam]] [[ concepts/tenancy | Tenancy ]] [[services/iam#Permissions]] [[./guides/x.md#Step 2|two]]")).toEqual([
      { target: "services/iam" },
      { target: "concepts/tenancy", alias: "Tenancy" },
      { target: "services/iam", heading: "Permissions" },
      { target: "guides/x", heading: "Step 2", alias: "two" },
    ]);
  });

  it("are not links inside inline code or fenced code blocks, where a document shows the syntax", () => {
    const body = "Write `[[concepts/tenancy]]` or ``[[a|b]]``.\n```md\n[[decisions/0001]]\n```\nBut [[services/iam]] links.\n~~~\n[[x]]\n~~~";
    expect(wikiLinksOf(body)).toEqual([{ target: "services/iam" }]);
  });

  it("ignore empty targets", () => {
    expect(wikiLinksOf("[[ ]] [[|alias]] [[#heading]]")).toEqual([]);
  });
});

describe("front matter", () => {
  it("a broken header leaves the document indexed by its text, titled by its first heading", () => {
    const doc = parseDocument("decisions/0003-x", "---\ntitle: A\nsummary: what it does: this\n---\n# The heading\nText.");
    expect(doc.frontMatter).toEqual({});
    expect(doc.title).toBe("The heading");
    expect(doc.body).toContain("Text.");
  });
});
