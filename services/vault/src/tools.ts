import { z } from "zod";
import { CATEGORIES, sectionOf, type VaultDocument } from "./documents.js";
import type { Vault } from "./vault.js";

/** A tool's answer: its output (sent as JSON text), or what was not found (a tool error). */
export type ToolOutcome = { output: unknown } | { notFound: string };

export interface VaultTool<Shape extends z.ZodRawShape = z.ZodRawShape> {
  name: string;
  description: string;
  input: Shape;
  run(vault: Vault, args: z.infer<z.ZodObject<Shape>>): ToolOutcome;
}

/** Spec §8: search limit defaults to 10; bounded so one call cannot return the whole vault. */
export const SEARCH_LIMIT = { default: 10, min: 1, max: 50 } as const;
export const RULE_TIERS = { 1: "Foundation", 2: "Architecture", 3: "Technology", 4: "Project" } as const;

const docPath = z
  .string()
  .min(1)
  .max(512)
  .describe("Vault path of the document without the .md extension, e.g. `services/iam` or `decisions/0004-permissions`");

function tool<Shape extends z.ZodRawShape>(definition: VaultTool<Shape>): VaultTool {
  return definition as unknown as VaultTool;
}

function docView(doc: VaultDocument) {
  return { path: doc.path, title: doc.title, summary: doc.summary, category: doc.category, frontMatter: doc.frontMatter, content: doc.body };
}

function listItem(doc: VaultDocument) {
  return { path: doc.path, title: doc.title, summary: doc.summary };
}

export const inFolder = (vault: Vault, folder: string) => vault.all().filter((doc) => doc.path.startsWith(`${folder}/`));
const frontMatterText = (doc: VaultDocument, key: string) => {
  const value = doc.frontMatter[key];
  return typeof value === "string" || typeof value === "number" ? String(value).trim() : undefined;
};
const adrNumber = (doc: VaultDocument) => {
  const value = Number(doc.frontMatter.adr ?? /^(\d+)-/.exec(doc.path.split("/").pop()!)?.[1]);
  return Number.isInteger(value) ? value : undefined;
};
const adrs = (vault: Vault) =>
  inFolder(vault, "decisions")
    .filter((doc) => adrNumber(doc) !== undefined)
    .sort((a, b) => adrNumber(a)! - adrNumber(b)!);
const adrView = (doc: VaultDocument) => ({
  adr: adrNumber(doc),
  status: frontMatterText(doc, "status") ?? null,
  date: frontMatterText(doc, "date") ?? null,
  ...listItem(doc),
});
const ruleView = (doc: VaultDocument) => ({
  ...listItem(doc),
  domain: frontMatterText(doc, "domain") ?? null,
  tier: Number(doc.frontMatter.tier) || null,
  content: doc.body,
});
export const serviceName = (doc: VaultDocument) => frontMatterText(doc, "service") ?? doc.path.split("/").pop()!;
const concernName = (doc: VaultDocument) => frontMatterText(doc, "concern") ?? doc.path.slice("cross-cutting/".length);

/** The 11 read-only tools of spec §4.7. */
export const VAULT_TOOLS: VaultTool[] = [
  tool({
    name: "search_docs",
    description:
      "Full-text search over the architecture vault (BM25 ranking with title and heading boosts, prefix matching, small typo tolerance). " +
      "Returns an array of { path, title, snippet, score }, best first.",
    input: {
      query: z.string().trim().min(1).max(500).describe("Words to search for"),
      category: z.enum(CATEGORIES).optional().describe("Only documents of this top folder of the vault"),
      limit: z
        .number()
        .int()
        .min(SEARCH_LIMIT.min)
        .max(SEARCH_LIMIT.max)
        .optional()
        .describe(`How many results at most (${SEARCH_LIMIT.min}-${SEARCH_LIMIT.max}, default ${SEARCH_LIMIT.default})`),
    },
    run: (vault, { query, category, limit }) => ({ output: vault.search(query, { category, limit: limit ?? SEARCH_LIMIT.default }) }),
  }),
  tool({
    name: "read_doc",
    description: "The full content of one vault document, with its title, summary, category and front matter.",
    input: { path: docPath },
    run: (vault, { path }) => {
      const doc = vault.get(path);
      return doc ? { output: docView(doc) } : { notFound: `Document not found: ${path}` };
    },
  }),
  tool({
    name: "read_section",
    description:
      "One section of a vault document, with its sub-sections. The heading matches case-insensitively: exactly, else by prefix, else by substring.",
    input: { path: docPath, heading: z.string().trim().min(1).max(200).describe("The heading, or part of it") },
    run: (vault, { path, heading }) => {
      const doc = vault.get(path);
      if (!doc) return { notFound: `Document not found: ${path}` };
      const section = sectionOf(doc, heading);
      if (!section) return { notFound: `No heading matching "${heading}" in ${path}; headings: ${doc.headings.map((h) => h.text).join(", ")}` };
      return { output: { path: doc.path, title: doc.title, heading: section.heading.text, level: section.heading.level, content: section.content } };
    },
  }),
  tool({
    name: "get_service_spec",
    description: "The full specification document of one service (from `services/`), by service name such as `iam` or `stack-registry`.",
    input: { service: z.string().trim().min(1).max(100).describe("The service name, e.g. `iam`") },
    run: (vault, { service }) => {
      const doc = inFolder(vault, "services").find((d) => serviceName(d) === service);
      return doc ? { output: { service: serviceName(doc), ...docView(doc) } } : { notFound: `Service not found: ${service}` };
    },
  }),
  tool({
    name: "list_services",
    description: "All services documented in the vault, with their titles and summaries.",
    input: {},
    run: (vault) => ({ output: inFolder(vault, "services").map((doc) => ({ service: serviceName(doc), ...listItem(doc) })) }),
  }),
  tool({
    name: "get_adr",
    description: "One architecture decision record by number, with its metadata (status, date) and content.",
    input: { number: z.number().int().min(0).max(999_999).describe("The ADR number, e.g. 4 for ADR 0004") },
    run: (vault, { number }) => {
      const doc = adrs(vault).find((d) => adrNumber(d) === number);
      return doc ? { output: { ...adrView(doc), content: doc.body } } : { notFound: `ADR not found: ${number}` };
    },
  }),
  tool({
    name: "list_adrs",
    description: "All architecture decision records in number order, optionally only those of one status (e.g. `accepted`).",
    input: { status: z.string().trim().min(1).max(50).optional().describe("Only records with this status, case-insensitive") },
    run: (vault, { status }) => ({
      output: adrs(vault)
        .map(adrView)
        .filter((adr) => !status || adr.status?.toLowerCase() === status.toLowerCase()),
    }),
  }),
  tool({
    name: "get_rules",
    description: "The rule documents of one domain (front matter `domain`), with their tier and content.",
    input: { domain: z.string().trim().min(1).max(100).describe("The rule domain, e.g. `security`") },
    run: (vault, { domain }) => {
      const rules = inFolder(vault, "rules").filter((doc) => frontMatterText(doc, "domain")?.toLowerCase() === domain.toLowerCase());
      return rules.length ? { output: rules.map(ruleView) } : { notFound: `No rules found for domain: ${domain}` };
    },
  }),
  tool({
    name: "get_rules_by_tier",
    description: "The rule documents at one tier: 1 Foundation, 2 Architecture, 3 Technology, 4 Project.",
    input: { tier: z.number().int().min(1).max(4).describe("1 Foundation, 2 Architecture, 3 Technology, 4 Project") },
    run: (vault, { tier }) => ({
      output: inFolder(vault, "rules")
        .filter((doc) => Number(doc.frontMatter.tier) === tier)
        .map(ruleView),
    }),
  }),
  tool({
    name: "get_cross_cutting",
    description: "The document of one cross-cutting concern (errors, pagination, observability…), or the list of all concerns when omitted.",
    input: { concern: z.string().trim().min(1).max(100).optional().describe("The concern, e.g. `errors`; omit to list all") },
    run: (vault, { concern }) => {
      const docs = inFolder(vault, "cross-cutting");
      if (!concern) return { output: docs.map((doc) => ({ concern: concernName(doc), ...listItem(doc) })) };
      const doc = docs.find((d) => concernName(d).toLowerCase() === concern.toLowerCase());
      return doc ? { output: { concern: concernName(doc), ...docView(doc) } } : { notFound: `Cross-cutting concern not found: ${concern}` };
    },
  }),
  tool({
    name: "get_links",
    description:
      "The [[wikilinks]] of a document: outbound (links it makes, with the linked title, or broken: true when the target does not exist) and inbound (documents linking to it).",
    input: { path: docPath },
    run: (vault, { path }) => {
      const doc = vault.get(path);
      if (!doc) return { notFound: `Document not found: ${path}` };
      const outbound = doc.links.map((link) => {
        const target = vault.resolveLink(link.target);
        return {
          direction: "outbound" as const,
          path: target?.path ?? link.target,
          title: target?.title ?? null,
          ...(link.heading ? { heading: link.heading } : {}),
          ...(link.alias ? { alias: link.alias } : {}),
          broken: !target,
        };
      });
      const inbound = vault.linksTo(doc.path).map((other) => ({ direction: "inbound" as const, path: other.path, title: other.title }));
      return { output: { path: doc.path, title: doc.title, outbound, inbound } };
    },
  }),
];
