import { watch, type FSWatcher } from "node:fs";
import { lstat, readdir, readFile, realpath, stat } from "node:fs/promises";
import { join, sep } from "node:path";
import { parseDocument, type Category, type VaultDocument } from "./documents.js";
import { DocumentIndex, type SearchResultItem } from "./document-index.js";

export type { SearchResultItem } from "./document-index.js";

export interface SearchOptions {
  category?: Category;
  limit: number;
}

/** What one (re-)indexing did, for the log and for tests. */
export interface IndexingReport {
  /** `full`: the whole folder was read again; `changed`: only the files named by file events */
  kind: "full" | "changed";
  documents: number;
  /** documents read or dropped by a `changed` update */
  touched: number;
  ms: number;
}

/** Which documents an update of the index added, changed or removed, by vault path (for subscriptions). */
export interface DocumentChanges {
  added: string[];
  changed: string[];
  removed: string[];
}

export interface VaultOptions {
  /** re-index on file changes (default true) */
  watch?: boolean;
  onIndexed?: (report: IndexingReport) => void;
}

const sameDocument = (a: VaultDocument, b: VaultDocument) => a.body === b.body && JSON.stringify(a.frontMatter) === JSON.stringify(b.frontMatter);

/** how long file events settle before the index is updated */
const SETTLE_MS = 50;
/** files read at once: a 10,000-file vault must not run out of file descriptors */
const READ_CONCURRENCY = 32;

/** Whether `candidate` (a real path) lies inside `root` (a real path). */
function isInside(root: string, candidate: string): boolean {
  return candidate === root || candidate.startsWith(root + sep);
}

const isMarkdown = (name: string) => name.toLowerCase().endsWith(".md");
const vaultPathOf = (relative: string) => relative.split(sep).join("/").slice(0, -".md".length);

/**
 * Every markdown file under the vault, by its real path. Symlinks are followed only when they
 * resolve inside the vault: nothing outside it is ever read (DESIGN §8). Dot files are skipped.
 */
async function markdownFiles(root: string): Promise<{ files: Map<string, string>; symlinks: boolean }> {
  const files = new Map<string, string>(); // vault path (no extension) → real file path
  const visited = new Set<string>();
  let symlinks = false;
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
        symlinks = true;
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
      else if (isFile && isMarkdown(entry.name)) files.set(logicalPath.slice(0, -3), real);
    }
  };
  await walk(root, "");
  return { files, symlinks };
}

/** Runs `task` over `items`, at most `concurrency` at a time. */
async function eachLimited<T>(items: T[], concurrency: number, task: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await task(items[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, worker));
}

const readText = (file: string) => readFile(file, "utf8").catch(() => undefined);

/**
 * The vault: a folder of markdown indexed in memory (DESIGN §8). File events update the index
 * without a restart: a changed or removed markdown file is re-read alone; anything else (a folder
 * renamed, a symlink in the vault, an event without a name) reads the whole folder again and swaps
 * the new index in at once. Documents are found only by their vault path in the index, so a path
 * can never name a file outside the folder.
 */
export class Vault {
  private index = new DocumentIndex();
  /** a symlink anywhere in the vault makes one file's content reachable by two paths */
  private hasSymlinks = false;
  private watcher: FSWatcher | undefined;
  private timer: NodeJS.Timeout | undefined;
  /** vault-relative names from file events; `null` when an event named no file */
  private pending = new Set<string | null>();
  /** updates run one after another */
  private queue: Promise<void> = Promise.resolve();
  private queued = 0;
  private readonly listeners = new Set<(changes: DocumentChanges) => void>();

  private constructor(
    private readonly root: string,
    private readonly onIndexed: (report: IndexingReport) => void,
  ) {}

  /** Opens and indexes the folder; `watch` (default) re-indexes on file changes. */
  static async open(dir: string, options: VaultOptions = {}): Promise<Vault> {
    const vault = new Vault(await realpath(dir), options.onIndexed ?? (() => {}));
    await vault.rebuild();
    if (options.watch ?? true) vault.startWatching();
    return vault;
  }

  /** For `/health`: the folder is still there and readable. */
  async check(): Promise<void> {
    await readdir(this.root);
  }

  get size(): number {
    return this.index.size;
  }

  /** The document at a vault path (`services/iam`; a trailing `.md` is tolerated). */
  get(path: string): VaultDocument | undefined {
    return this.index.get(path.replace(/\.md$/i, ""));
  }

  /** Every document, by path. */
  all(): readonly VaultDocument[] {
    return this.index.all();
  }

  /** Resolves a wikilink target: an exact vault path, else a unique file name anywhere in the vault. */
  resolveLink(target: string): VaultDocument | undefined {
    return this.index.resolveLink(target);
  }

  /** The documents whose wikilinks resolve to `path`. */
  linksTo(path: string): VaultDocument[] {
    return this.index.linksTo(path);
  }

  search(query: string, options: SearchOptions): SearchResultItem[] {
    return this.index.search(query, options.limit, options.category);
  }

  /**
   * Calls `listener` after each update of the index that added, changed or removed documents
   * (MCP resource subscriptions); returns the function that stops it.
   */
  onChange(listener: (changes: DocumentChanges) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Reads the whole folder again and swaps the new index in at once. */
  rebuild(): Promise<void> {
    return this.enqueue(() => this.readAll());
  }

  /** Resolves once pending file events have been indexed. */
  async settled(): Promise<void> {
    while (this.timer || this.queued > 0) {
      await (this.queued > 0 ? this.queue : new Promise((resolve) => setTimeout(resolve, SETTLE_MS)));
    }
  }

  close(): void {
    this.watcher?.close();
    this.watcher = undefined;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private enqueue(update: () => Promise<void>): Promise<void> {
    this.queued++;
    const run = this.queue.then(update).finally(() => this.queued--);
    this.queue = run.catch(() => {});
    return run;
  }

  private async readAll(): Promise<void> {
    const started = performance.now();
    const { files, symlinks } = await markdownFiles(this.root);
    const documents: VaultDocument[] = [];
    await eachLimited([...files], READ_CONCURRENCY, async ([path, real]) => {
      const source = await readText(real);
      if (source !== undefined) documents.push(parseDocument(path, source));
    });
    const before = this.index;
    this.index = DocumentIndex.of(documents);
    this.hasSymlinks = symlinks;
    const changes: DocumentChanges = { added: [], changed: [], removed: [] };
    for (const doc of this.index.all()) {
      const old = before.get(doc.path);
      if (!old) changes.added.push(doc.path);
      else if (!sameDocument(old, doc)) changes.changed.push(doc.path);
    }
    for (const doc of before.all()) if (!this.index.get(doc.path)) changes.removed.push(doc.path);
    this.onIndexed({ kind: "full", documents: this.index.size, touched: documents.length, ms: performance.now() - started });
    this.announce(changes);
  }

  private announce(changes: DocumentChanges): void {
    if (changes.added.length + changes.changed.length + changes.removed.length === 0) return;
    for (const listener of this.listeners) listener(changes);
  }

  /**
   * Re-reads the markdown files named by file events; `false` when only reading the whole folder is
   * safe: a symlink in the vault, a folder created, renamed or removed.
   */
  private async readChanged(names: string[]): Promise<boolean> {
    if (this.hasSymlinks) return false;
    const started = performance.now();
    const changes: [string, VaultDocument | undefined][] = [];
    for (const name of names) {
      if (name.split(sep).some((part) => part.startsWith("."))) continue; // dot files are not part of the vault
      const file = join(this.root, name);
      const entry = await lstat(file).catch(() => undefined);
      if (entry?.isSymbolicLink() || entry?.isDirectory()) return false;
      if (!isMarkdown(name)) {
        // an editor's temporary file is no concern; a vanished folder with documents is
        if (!entry && this.index.hasFolder(name.split(sep).join("/"))) return false;
        continue;
      }
      const source = entry?.isFile() ? await readText(file) : undefined;
      const path = vaultPathOf(name);
      changes.push([path, source === undefined ? undefined : parseDocument(path, source)]);
    }
    const changed: DocumentChanges = { added: [], changed: [], removed: [] };
    for (const [path, doc] of changes) {
      const old = this.index.get(path);
      if (doc) {
        if (!old) changed.added.push(path);
        else if (!sameDocument(old, doc)) changed.changed.push(path);
        this.index.put(doc);
      } else if (old) {
        changed.removed.push(path);
        this.index.remove(path);
      }
    }
    if (changes.length) {
      this.onIndexed({ kind: "changed", documents: this.index.size, touched: changes.length, ms: performance.now() - started });
    }
    this.announce(changed);
    return true;
  }

  private startWatching(): void {
    try {
      this.watcher = watch(this.root, { recursive: true }, (_event, name) => this.noteChange(name ? String(name) : null));
      this.watcher.on("error", () => this.noteChange(null));
      this.watcher.unref();
    } catch {
      // no file events on this platform: the index stays as loaded until rebuild() is called
    }
  }

  private noteChange(name: string | null): void {
    this.pending.add(name);
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      const names = [...this.pending];
      this.pending.clear();
      void this.enqueue(async () => {
        const named = names.filter((name): name is string => name !== null);
        if (named.length < names.length || !(await this.readChanged(named))) await this.readAll();
      });
    }, SETTLE_MS);
    this.timer.unref();
  }
}
