import { watch, type FSWatcher } from "node:fs";
import { readdir, readFile, realpath, stat } from "node:fs/promises";
import { join, sep } from "node:path";
import MiniSearch from "minisearch";
import { parseDocument, type Category, type VaultDocument } from "./documents.js";

/** A search hit (spec §2.11). */
export interface SearchResultItem {
  path: string;
  title: string;
  snippet: string;
  score: number;
}

export interface SearchOptions {
  category?: Category;
  limit: number;
}

interface IndexedFields {
  id: string;
  title: string;
  headings: string;
  summary: string;
  body: string;
}

const SNIPPET_CHARS = 200;
/** how long file events settle before the index is rebuilt */
const REBUILD_DEBOUNCE_MS = 50;

function newIndex(): MiniSearch<IndexedFields> {
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

/** Whether `candidate` (a real path) lies inside `root` (a real path). */
function isInside(root: string, candidate: string): boolean {
  return candidate === root || candidate.startsWith(root + sep);
}

/**
 * Every markdown file under the vault, by its real path. Symlinks are followed only when they
 * resolve inside the vault: nothing outside it is ever read (DESIGN §8). Dot files are skipped.
 */
async function markdownFiles(root: string): Promise<Map<string, string>> {
  const files = new Map<string, string>(); // vault path (no extension) → real file path
  const visited = new Set<string>();
  const walk = async (dir: string, logical: string) => {
    if (visited.has(dir)) return;
    visited.add(dir);
    const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
    for (const entry of entries) {
      if (entry.name.startsWith(".")) continue;
      const logicalPath = logical ? `${logical}/${entry.name}` : entry.name;
      let real = join(dir, entry.name);
      let isDirectory = entry.isDirectory();
      let isFile = entry.isFile();
      if (entry.isSymbolicLink()) {
        try {
          real = await realpath(real);
          const target = await stat(real);
          isDirectory = target.isDirectory();
          isFile = target.isFile();
        } catch {
          continue; // dangling link
        }
        if (!isInside(root, real)) continue;
      }
      if (isDirectory) await walk(real, logicalPath);
      else if (isFile && entry.name.toLowerCase().endsWith(".md")) files.set(logicalPath.slice(0, -3), real);
    }
  };
  await walk(root, "");
  return files;
}

function snippetOf(doc: VaultDocument, terms: string[]): string {
  const plain = doc.body.replace(/\s+/g, " ").trim();
  const lower = plain.toLowerCase();
  let at = -1;
  for (const term of terms) {
    const found = lower.indexOf(term.toLowerCase());
    if (found >= 0 && (at < 0 || found < at)) at = found;
  }
  if (at < 0) return doc.summary || plain.slice(0, SNIPPET_CHARS);
  const start = Math.max(0, at - Math.floor(SNIPPET_CHARS / 3));
  const end = Math.min(plain.length, start + SNIPPET_CHARS);
  return `${start > 0 ? "…" : ""}${plain.slice(start, end).trim()}${end < plain.length ? "…" : ""}`;
}

interface Snapshot {
  documents: Map<string, VaultDocument>;
  index: MiniSearch<IndexedFields>;
}

/**
 * The vault: a folder of markdown indexed in memory, rebuilt when files change (DESIGN §8).
 * Documents are found only by their vault path in the index, so a path can never name a file
 * outside the folder.
 */
export class Vault {
  private snapshot: Snapshot = { documents: new Map(), index: newIndex() };
  private watcher: FSWatcher | undefined;
  private timer: NodeJS.Timeout | undefined;
  private rebuilding: Promise<void> | undefined;
  private rebuildAgain = false;

  private constructor(private readonly root: string) {}

  /** Opens and indexes the folder; `watch` re-indexes on file changes. */
  static async open(dir: string, options: { watch?: boolean } = {}): Promise<Vault> {
    const vault = new Vault(await realpath(dir));
    await vault.rebuild();
    if (options.watch ?? true) vault.startWatching();
    return vault;
  }

  /** For `/health`: the folder is still there and readable. */
  async check(): Promise<void> {
    await readdir(this.root);
  }

  get size(): number {
    return this.snapshot.documents.size;
  }

  /** The document at a vault path (`services/iam`; a trailing `.md` is tolerated). */
  get(path: string): VaultDocument | undefined {
    return this.snapshot.documents.get(path.replace(/\.md$/i, ""));
  }

  all(): VaultDocument[] {
    return [...this.snapshot.documents.values()].sort((a, b) => a.path.localeCompare(b.path));
  }

  /** Resolves a wikilink target: an exact vault path, else a unique file name anywhere in the vault. */
  resolveLink(target: string): VaultDocument | undefined {
    const exact = this.get(target);
    if (exact || target.includes("/")) return exact;
    const named = this.all().filter((doc) => doc.path.split("/").pop() === target);
    return named.length === 1 ? named[0] : undefined;
  }

  search(query: string, options: SearchOptions): SearchResultItem[] {
    const { documents, index } = this.snapshot;
    const hits = index.search(query, {
      filter: options.category ? (hit) => documents.get(hit.id as string)?.category === options.category : undefined,
    });
    return hits.slice(0, options.limit).flatMap((hit) => {
      const doc = documents.get(hit.id as string);
      if (!doc) return [];
      return [{ path: doc.path, title: doc.title, snippet: snippetOf(doc, hit.terms), score: Math.round(hit.score * 1000) / 1000 }];
    });
  }

  /** Re-reads the whole folder and swaps the new index in at once; calls made meanwhile are merged. */
  async rebuild(): Promise<void> {
    if (this.rebuilding) {
      this.rebuildAgain = true;
      return this.rebuilding;
    }
    this.rebuilding = (async () => {
      do {
        this.rebuildAgain = false;
        this.snapshot = await this.load();
      } while (this.rebuildAgain);
    })().finally(() => {
      this.rebuilding = undefined;
    });
    return this.rebuilding;
  }

  /** Resolves once pending file events have been indexed. */
  async settled(): Promise<void> {
    while (this.timer || this.rebuilding) {
      await (this.rebuilding ?? new Promise((resolve) => setTimeout(resolve, REBUILD_DEBOUNCE_MS)));
    }
  }

  close(): void {
    this.watcher?.close();
    this.watcher = undefined;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private async load(): Promise<Snapshot> {
    const files = await markdownFiles(this.root);
    const documents = new Map<string, VaultDocument>();
    await Promise.all(
      [...files].map(async ([path, real]) => {
        const source = await readFile(real, "utf8").catch(() => undefined);
        if (source !== undefined) documents.set(path, parseDocument(path, source));
      }),
    );
    const index = newIndex();
    index.addAll(
      [...documents.values()].map((doc) => ({
        id: doc.path,
        title: doc.title,
        headings: doc.headings.map((h) => h.text).join("\n"),
        summary: doc.summary,
        body: doc.body,
      })),
    );
    return { documents, index };
  }

  private startWatching(): void {
    try {
      this.watcher = watch(this.root, { recursive: true }, () => this.scheduleRebuild());
      this.watcher.on("error", () => this.scheduleRebuild());
      this.watcher.unref();
    } catch {
      // no file events on this platform: the index stays as loaded until rebuild() is called
    }
  }

  private scheduleRebuild(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.rebuild();
    }, REBUILD_DEBOUNCE_MS);
    this.timer.unref();
  }
}
