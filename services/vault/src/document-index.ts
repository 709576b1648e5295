import type { Category, VaultDocument } from "./documents.js";
import { FullTextIndex, type Field } from "./full-text.js";

/** A search hit (spec §2.11). */
export interface SearchResultItem {
  path: string;
  title: string;
  snippet: string;
  score: number;
}

const SNIPPET_CHARS = 200;
/** how much of the snippet comes before the match it is centred on */
const SNIPPET_LEAD = 60;
/** occurrences of one term looked at when choosing the snippet */
const OCCURRENCES_PER_TERM = 64;
/** matched words looked for in a snippet: the query's own first, then completions and corrections */
const SNIPPET_TERMS = 16;

const fieldsOf = (doc: VaultDocument): Record<Field, string> => ({
  title: doc.title,
  headings: doc.headings.map((h) => h.text).join("\n"),
  summary: doc.summary,
  body: doc.body,
});

const fileNameOf = (path: string) => path.slice(path.lastIndexOf("/") + 1);

/** The body as running text: no heading marks, emphasis, code ticks or link syntax. */
export function plainTextOf(markdown: string): string {
  return markdown
    .replace(/^[ \t]*#{1,6}[ \t]+/gm, "")
    .replace(/^[ \t]*(```|~~~).*$/gm, "")
    .replace(/\[\[([^\]|\n]+)\|([^\]\n]+)\]\]/g, "$2")
    .replace(/\[\[([^\]\n]+)\]\]/g, "$1")
    .replace(/!?\[([^\]\n]*)\]\([^)\n]*\)/g, "$1")
    .replace(/(\*\*|__|`)/g, "")
    .replace(/\s+/g, " ")
    .trim();
}

const isWordChar = (char: string | undefined) => char !== undefined && /[\p{L}\p{N}_]/u.test(char);

/** Where `term` starts a word in `text` (lower case both). */
function occurrencesOf(text: string, term: string): number[] {
  const found: number[] = [];
  for (let at = text.indexOf(term); at >= 0 && found.length < OCCURRENCES_PER_TERM; at = text.indexOf(term, at + 1)) {
    if (!isWordChar(text[at - 1])) found.push(at);
  }
  return found;
}

/**
 * The start of the stretch of `text` (one snippet long) where the most distinct `terms` begin
 * words, the earliest on a tie; -1 when none occurs. One pass over the occurrences.
 */
function bestPlaceOf(text: string, terms: string[]): number {
  const marks = terms.flatMap((term, t) => occurrencesOf(text, term).map((at) => [at, t] as const)).sort((a, b) => a[0] - b[0]);
  const inWindow = terms.map(() => 0);
  let distinct = 0;
  let right = 0;
  let best = -1;
  let bestCount = 0;
  for (const [at, term] of marks) {
    while (right < marks.length && marks[right]![0] < at + SNIPPET_CHARS - SNIPPET_LEAD) {
      if (inWindow[marks[right]![1]]!++ === 0) distinct++;
      right++;
    }
    if (distinct > bestCount) [best, bestCount] = [at, distinct];
    if (--inWindow[term]! === 0) distinct--;
  }
  return best;
}

/**
 * About 200 characters of the document's text around its best match: the place where the most
 * distinct matched terms fall within one snippet. Only the lines around that place are turned
 * into running text, so a long document costs no more than a short one.
 */
export function snippetOf(doc: VaultDocument, terms: string[]): string {
  const wanted = [...new Set(terms.map((term) => term.toLowerCase()))];
  // the title is shown beside the snippet already: its H1 would only repeat it
  const body = doc.body.replace(/^#[ \t]+(.+)$/m, (line, heading: string) => (heading.trim() === doc.title ? "" : line));
  const near = bestPlaceOf(body.toLowerCase(), wanted);
  if (near < 0) return doc.summary || clip(plainTextOf(body.slice(0, SNIPPET_CHARS * 4)), 0, false, body.length > SNIPPET_CHARS * 4);
  const from = body.lastIndexOf("\n", Math.max(0, near - SNIPPET_LEAD * 2)) + 1;
  const lineEnd = body.indexOf("\n", near + SNIPPET_CHARS * 2);
  const to = lineEnd < 0 ? body.length : lineEnd;
  const region = plainTextOf(body.slice(from, to));
  const best = Math.max(0, bestPlaceOf(region.toLowerCase(), wanted));
  return clip(region, Math.max(0, best - SNIPPET_LEAD), from > 0 && body.slice(0, from).trim() !== "", to < body.length);
}

/** `SNIPPET_CHARS` of `text` from about `from`, cut at word boundaries, with ellipses where cut. */
function clip(text: string, from: number, cutBefore = false, cutAfter = false): string {
  let start = from;
  if (start > 0) {
    const space = text.indexOf(" ", start);
    if (space >= 0 && space < start + 20) start = space + 1;
  }
  let end = Math.min(text.length, start + SNIPPET_CHARS);
  if (end < text.length) {
    const space = text.lastIndexOf(" ", end);
    if (space > start + SNIPPET_CHARS / 2) end = space;
  }
  return `${start > 0 || cutBefore ? "…" : ""}${text.slice(start, end).trim()}${end < text.length || cutAfter ? "…" : ""}`;
}

/**
 * The parsed documents of a vault with what the tools look them up by: the full-text index, file
 * names for short wikilinks, and who links to what. Kept current one document at a time.
 */
export class DocumentIndex {
  private readonly documents = new Map<string, VaultDocument>();
  private fullText = new FullTextIndex();
  /** file name → paths with that name, for `[[name]]` links */
  private readonly byFileName = new Map<string, Set<string>>();
  /** link target as written → paths of the documents that write it */
  private readonly linkers = new Map<string, Set<string>>();
  private sorted: VaultDocument[] | undefined;

  static of(documents: VaultDocument[]): DocumentIndex {
    const index = new DocumentIndex();
    for (const doc of documents) index.remember(doc);
    return index;
  }

  get size(): number {
    return this.documents.size;
  }

  get(path: string): VaultDocument | undefined {
    return this.documents.get(path);
  }

  /** Every document, by path. */
  all(): readonly VaultDocument[] {
    this.sorted ??= [...this.documents.values()].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
    return this.sorted;
  }

  /** Whether any document lies under the folder `path`. */
  hasFolder(path: string): boolean {
    const prefix = `${path}/`;
    for (const key of this.documents.keys()) if (key.startsWith(prefix)) return true;
    return false;
  }

  /** Adds or replaces a document. */
  put(doc: VaultDocument): void {
    if (this.documents.has(doc.path)) this.remove(doc.path);
    this.remember(doc);
  }

  remove(path: string): void {
    const doc = this.documents.get(path);
    if (!doc) return;
    this.documents.delete(path);
    this.fullText.remove(path);
    if (this.fullText.wasteful) this.reindexFullText();
    this.byFileName.get(fileNameOf(path))?.delete(path);
    for (const link of doc.links) this.linkers.get(link.target)?.delete(path);
    this.sorted = undefined;
  }

  /** An exact vault path, else a file name that only one document has. */
  resolveLink(target: string): VaultDocument | undefined {
    const exact = this.documents.get(target);
    if (exact || target.includes("/")) return exact;
    const named = this.byFileName.get(target);
    return named?.size === 1 ? this.documents.get(named.values().next().value!) : undefined;
  }

  /** The documents whose wikilinks resolve to `path`, by path. */
  linksTo(path: string): VaultDocument[] {
    const candidates = new Set([...(this.linkers.get(path) ?? []), ...(this.linkers.get(fileNameOf(path)) ?? [])]);
    candidates.delete(path);
    return [...candidates]
      .map((source) => this.documents.get(source)!)
      .filter((source) => source.links.some((link) => this.resolveLink(link.target)?.path === path))
      .sort((a, b) => (a.path < b.path ? -1 : 1));
  }

  search(query: string, limit: number, category?: Category): SearchResultItem[] {
    const accept = category ? (path: string) => this.documents.get(path)?.category === category : undefined;
    const { hits, terms } = this.fullText.search(query, limit, accept);
    return hits.map(({ id, score }) => {
      const doc = this.documents.get(id)!;
      return { path: doc.path, title: doc.title, snippet: snippetOf(doc, terms.slice(0, SNIPPET_TERMS)), score: Math.round(score * 1000) / 1000 };
    });
  }

  /** A fresh full-text index of the documents, without the postings of removed ones. */
  private reindexFullText(): void {
    this.fullText = new FullTextIndex();
    for (const doc of this.documents.values()) this.fullText.add(doc.path, fieldsOf(doc));
  }

  private remember(doc: VaultDocument): void {
    this.documents.set(doc.path, doc);
    this.fullText.add(doc.path, fieldsOf(doc));
    const name = fileNameOf(doc.path);
    if (!this.byFileName.has(name)) this.byFileName.set(name, new Set());
    this.byFileName.get(name)!.add(doc.path);
    for (const link of doc.links) {
      if (!this.linkers.has(link.target)) this.linkers.set(link.target, new Set());
      this.linkers.get(link.target)!.add(doc.path);
    }
    this.sorted = undefined;
  }
}
