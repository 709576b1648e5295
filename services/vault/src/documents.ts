import { parse as parseYaml } from "yaml";

/** The top folders of the vault: the search categories of spec §4.7. */
export const CATEGORIES = ["services", "concepts", "cross-cutting", "guides", "rules", "decisions", "implementation"] as const;
export type Category = (typeof CATEGORIES)[number];

export interface Heading {
  text: string;
  level: number;
  /** line index of the heading in the body */
  line: number;
}

export interface WikiLink {
  /** the target as written, without alias or heading */
  target: string;
  alias?: string;
  heading?: string;
}

/** One markdown file of the vault, parsed. */
export interface VaultDocument {
  /** vault-relative path without `.md`, `/`-separated: `services/iam` */
  path: string;
  category: Category | null;
  title: string;
  summary: string;
  frontMatter: Record<string, unknown>;
  /** the markdown after the front matter */
  body: string;
  headings: Heading[];
  links: WikiLink[];
}

const FRONT_MATTER = /^---\r?\n([\s\S]*?)\r?\n---[ \t]*(?:\r?\n|$)/;
const HEADING = /^(#{1,6})[ \t]+(.+?)[ \t#]*$/;
const FENCE = /^[ \t]*(```|~~~)/;
const WIKILINK = /\[\[([^\]\n]+?)\]\]/g;

function frontMatterOf(source: string): { data: Record<string, unknown>; body: string } {
  const match = FRONT_MATTER.exec(source);
  if (!match) return { data: {}, body: source };
  let data: unknown;
  try {
    data = parseYaml(match[1]!);
  } catch {
    // a broken header must not hide the document: it is indexed by its text alone
    data = {};
  }
  return { data: data && typeof data === "object" && !Array.isArray(data) ? (data as Record<string, unknown>) : {}, body: source.slice(match[0].length) };
}

/** The headings outside fenced code blocks. */
export function headingsOf(lines: string[]): Heading[] {
  const headings: Heading[] = [];
  let fenced = false;
  lines.forEach((line, index) => {
    if (FENCE.test(line)) fenced = !fenced;
    if (fenced) return;
    const match = HEADING.exec(line);
    if (match) headings.push({ text: match[2]!.trim(), level: match[1]!.length, line: index });
  });
  return headings;
}

/** The text outside fenced code blocks and inline code spans: what is written there is shown, not linked. */
function proseOf(lines: string[]): string {
  let fenced = false;
  return lines
    .map((line) => {
      if (FENCE.test(line)) {
        fenced = !fenced;
        return "";
      }
      return fenced ? "" : line.replace(/(`+)[\s\S]*?\1/g, "");
    })
    .join("\n");
}

/**
 * `[[path]]`, `[[path|alias]]`, `[[path#heading]]` and `[[path#heading|alias]]`, outside code, so a
 * document can show the syntax without linking.
 */
export function wikiLinksOf(body: string): WikiLink[] {
  const links: WikiLink[] = [];
  for (const match of proseOf(body.split(/\r?\n/)).matchAll(WIKILINK)) {
    const [reference, alias] = match[1]!.split("|", 2) as [string, string | undefined];
    const [target, heading] = reference.split("#", 2) as [string, string | undefined];
    const link: WikiLink = { target: normalizeLinkTarget(target) };
    if (alias?.trim()) link.alias = alias.trim();
    if (heading?.trim()) link.heading = heading.trim();
    if (link.target) links.push(link);
  }
  return links;
}

function normalizeLinkTarget(target: string): string {
  return target.trim().replace(/\\/g, "/").replace(/^\.?\/+/, "").replace(/\.md$/i, "");
}

function text(value: unknown): string {
  return typeof value === "string" ? value.trim() : value === undefined || value === null ? "" : String(value);
}

/** Parses one markdown file; `path` is its vault-relative path without extension. */
export function parseDocument(path: string, source: string): VaultDocument {
  const { data, body } = frontMatterOf(source);
  const lines = body.split(/\r?\n/);
  const headings = headingsOf(lines);
  const top = path.split("/")[0]!;
  const category = path.includes("/") && (CATEGORIES as readonly string[]).includes(top) ? (top as Category) : null;
  const title = text(data.title) || headings.find((h) => h.level === 1)?.text || path.split("/").pop()!;
  return { path, category, title, summary: text(data.summary), frontMatter: data, body, headings, links: wikiLinksOf(body) };
}

/**
 * The section under the first heading that matches `wanted` (exact, then prefix, then substring,
 * case-insensitive), with its sub-sections: up to the next heading of the same or a higher level.
 */
export function sectionOf(doc: VaultDocument, wanted: string): { heading: Heading; content: string } | undefined {
  const needle = wanted.trim().replace(/^#+\s*/, "").toLowerCase();
  const lower = (h: Heading) => h.text.toLowerCase();
  const heading =
    doc.headings.find((h) => lower(h) === needle) ??
    doc.headings.find((h) => lower(h).startsWith(needle)) ??
    doc.headings.find((h) => lower(h).includes(needle));
  if (!heading) return undefined;
  const next = doc.headings.find((h) => h.line > heading.line && h.level <= heading.level);
  const lines = doc.body.split(/\r?\n/).slice(heading.line, next?.line);
  return { heading, content: lines.join("\n").trimEnd() };
}
