import MiniSearch from "minisearch";
import type { Category, VaultDocument } from "./documents.js";

/** A search hit (spec §2.11). */
export interface SearchResultItem {
  path: string;
  title: string;
  snippet: string;
  score: number;
}

interface IndexedFields {
  id: string;
  title: string;
  headings: string;
  summary: string;
  body: string;
}

const SNIPPET_CHARS = 200;
/** how much of the snippet comes before the match it is centred on */
const SNIPPET_LEAD = 60;
/** occurrences of one term looked at when choosing the snippet */
const OCCURRENCES_PER_TERM = 64;

function newSearchIndex(): MiniSearch<IndexedFields> {
  return new MiniSearch<IndexedFields>({
    fields: ["title", "headings", "summary", "body"],
    searchOptions: {
      // BM25 with field boosts; prefix matching and a small edit distance for typos
      boost: { title: 4, headings: 2, summary: 1.5 },
      prefix: (term) => term.length >= 2,
      fuzzy: (term) => (term.length >= 4 ? 0.2 : false),
      maxFuzzy: 2,
    },
  });
}

const fieldsOf = (doc: VaultDocument): IndexedFields => ({
  id: doc.path,
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
 * About 200 characters of the document's text around its best match: the place where the most
 * distinct matched terms fall within one snippet, the earliest such place on a tie.
 */
export function snippetOf(doc: VaultDocument, terms: string[]): string {
  const plain = plainTextOf(doc.body);
  const lower = plain.toLowerCase();
  const wanted = [...new Set(terms.map((term) => term.toLowerCase()))];
  const positions = wanted.map((term) => occurrencesOf(lower, term));
  let best = -1;
  let bestCount = 0;
  for (const start of positions.flat().sort((a, b) => a - b)) {
    const end = start + SNIPPET_CHARS - SNIPPET_LEAD;
    const count = positions.filter((list) => list.some((at) => at >= start && at < end)).length;
    if (count > bestCount) [best, bestCount] = [start, count];
  }
  if (best < 0) return doc.summary || clip(plain, 0);
  return clip(plain, Math.max(0, best - SNIPPET_LEAD));
}

/** `SNIPPET_CHARS` of `text` from about `from`, cut at word boundaries, with ellipses where cut. */
function clip(text: string, from: number): string {
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
  return `${start > 0 ? "…" : ""}${text.slice(start, end).trim()}${end < text.length ? "…" : ""}`;
}

/**
 * The parsed documents of a vault with what the tools look them up by: the full-text index, file
 * names for short wikilinks, and who links to what. Kept current one document at a time.
 */
export class DocumentIndex {
  private readonly documents = new Map<string, VaultDocument>();
  private readonly fullText = newSearchIndex();
  /** file name → paths with that name, for `[[name]]` links */
  private readonly byFileName = new Map<string, Set<string>>();
  /** link target as written → paths of the documents that write it */
  private readonly linkers = new Map<string, Set<string>>();
  private sorted: VaultDocument[] | undefined;

  static of(documents: VaultDocument[]): DocumentIndex {
    const index = new DocumentIndex();
    for (const doc of documents) index.remember(doc);
    index.fullText.addAll(documents.map(fieldsOf));
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
    this.fullText.add(fieldsOf(doc));
  }

  remove(path: string): void {
    const doc = this.documents.get(path);
    if (!doc) return;
    this.documents.delete(path);
    this.fullText.discard(path);
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
    const hits = this.fullText.search(query, {
      filter: category ? (hit) => this.documents.get(hit.id as string)?.category === category : undefined,
    });
    return hits.slice(0, limit).flatMap((hit) => {
      const doc = this.documents.get(hit.id as string);
      if (!doc) return [];
      return [{ path: doc.path, title: doc.title, snippet: snippetOf(doc, hit.terms), score: Math.round(hit.score * 1000) / 1000 }];
    });
  }

  private remember(doc: VaultDocument): void {
    this.documents.set(doc.path, doc);
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
