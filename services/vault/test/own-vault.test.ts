import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEFAULT_VAULT_DIR } from "../src/config.js";
import { CATEGORIES, sectionOf, type VaultDocument } from "../src/documents.js";
import { RULE_TIERS } from "../src/tools.js";
import { Vault } from "../src/vault.js";

/**
 * The project's own vault (`docs/vault`, the default VAULT_DIR) holds to the format its tools
 * rely on (guides/vault-format): these checks fail the build when a document drifts from it.
 */
const repository = fileURLToPath(new URL("../../..", import.meta.url));
let vault: Vault;
let docs: readonly VaultDocument[];

beforeAll(async () => {
  vault = await Vault.open(DEFAULT_VAULT_DIR, { watch: false });
  docs = vault.all();
});
afterAll(() => vault?.close());

const inFolder = (folder: string) => docs.filter((doc) => doc.category === folder);
const text = (doc: VaultDocument, key: string) => (typeof doc.frontMatter[key] === "string" ? (doc.frontMatter[key] as string) : undefined);

describe("the project's own vault", () => {
  it("has documents in every category of spec §4.7", () => {
    for (const category of CATEGORIES) expect(inFolder(category).length, category).toBeGreaterThan(0);
  });

  it("keeps every document in a category folder, with a title, a one-sentence summary and an H1 equal to the title", () => {
    for (const doc of docs) {
      expect(doc.category, doc.path).not.toBeNull();
      expect(text(doc, "title"), `${doc.path}: title`).toBeTruthy();
      expect(text(doc, "summary"), `${doc.path}: summary`).toBeTruthy();
      expect(doc.headings.filter((h) => h.level === 1).map((h) => h.text), `${doc.path}: H1`).toEqual([doc.title]);
    }
  });

  it("numbers decision records like their file names, with a known status and an ISO date", () => {
    for (const doc of inFolder("decisions")) {
      const fileNumber = Number(/^(\d{4})-/.exec(doc.path.split("/").pop()!)?.[1]);
      expect(doc.frontMatter.adr, doc.path).toBe(fileNumber);
      expect(["proposed", "accepted", "superseded", "deprecated"], doc.path).toContain(doc.frontMatter.status);
      expect(String(doc.frontMatter.date), doc.path).toMatch(/^\d{4}-\d{2}-\d{2}$/);
    }
  });

  it("gives every rule a domain and a tier of 1-4, and has rules at every tier", () => {
    for (const doc of inFolder("rules")) {
      expect(text(doc, "domain"), doc.path).toMatch(/^[a-z-]+$/);
      expect(Object.keys(RULE_TIERS).map(Number), doc.path).toContain(doc.frontMatter.tier);
    }
    for (const tier of Object.keys(RULE_TIERS).map(Number)) {
      expect(inFolder("rules").filter((doc) => doc.frontMatter.tier === tier).length, `tier ${tier}`).toBeGreaterThan(0);
    }
  });

  it("documents every service of the repository, and only services that exist unless marked planned", () => {
    const built = readdirSync(join(repository, "services"));
    const documented = new Map(inFolder("services").map((doc) => [text(doc, "service"), doc]));
    for (const name of built) expect(documented.has(name), `services/${name} has no doc`).toBe(true);
    expect(documented.has("cli")).toBe(true);
    for (const [name, doc] of documented) {
      const where = name === "cli" ? "packages/cli" : `services/${name}`;
      if (doc.frontMatter.status === "planned") expect(existsSync(join(repository, where)), `${name} is built now`).toBe(false);
      else expect(existsSync(join(repository, where)), `${doc.path} names ${where}`).toBe(true);
    }
  });

  it("names each cross-cutting concern like its file", () => {
    for (const doc of inFolder("cross-cutting")) expect(text(doc, "concern"), doc.path).toBe(doc.path.split("/").pop());
  });

  it("has no broken wikilinks, and every linked heading exists", () => {
    const broken: string[] = [];
    for (const doc of docs) {
      for (const link of doc.links) {
        const target = vault.resolveLink(link.target);
        if (!target) broken.push(`${doc.path} → ${link.target}`);
        else if (link.heading && !sectionOf(target, link.heading)) broken.push(`${doc.path} → ${link.target}#${link.heading}`);
      }
    }
    expect(broken).toEqual([]);
  });

  it("documents its own format", () => {
    expect(vault.get("guides/vault-format")?.title).toBeTruthy();
  });
});
