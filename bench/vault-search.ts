// Benchmark of the vault tool server (issue 5 "Speed"): a generated vault of 10,000 markdown
// documents, indexed from disk, then searched. Prints the full index build time, search latency
// p50/p99 in process and over HTTP (JSON-RPC tools/call), and the memory the index holds. Prints
// figures, never passes or fails. Targets: full index < 5 s, search p99 < 5 ms.
//
//   node bench/run.mjs bench/vault-search.ts
//   BENCH_DOCUMENTS=20000 BENCH_QUERIES=5000 node bench/run.mjs bench/vault-search.ts
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { listen, silentLogger } from "@core/kit";
import { createApp } from "../services/vault/src/app.js";
import { CATEGORIES } from "../services/vault/src/documents.js";
import { Vault } from "../services/vault/src/vault.js";

const DOCUMENTS = Number(process.env.BENCH_DOCUMENTS ?? 10_000);
const QUERIES = Number(process.env.BENCH_QUERIES ?? 2_000);
const HTTP_QUERIES = Number(process.env.BENCH_HTTP_QUERIES ?? 500);
const VOCABULARY = 30_000;

setFlagsFromString("--expose_gc");
const gc = runInNewContext("gc") as () => void;

/** mulberry32: the same vault and queries on every run */
function random(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const rand = random(20261121);
const pick = <T>(items: readonly T[]) => items[Math.floor(rand() * items.length)]!;

// The vocabulary: the most frequent words of English at the top ranks, as in any running text,
// then 30,000 made-up words of one to four syllables (few share a long prefix, as in English)
const COMMON = (
  "the of and to a in is that for it as was with be by on not he this are or his from at which but have an they you " +
  "were her all she there would their we him been has when who will more no if out so said what up its about into than " +
  "them can only other new some could time these two may then do first any my now such like our over man me even most"
).split(" ");
const ONSETS = ["", "b", "c", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z", "br", "ch", "cl", "dr", "fl", "gr", "pl", "pr", "sh", "st", "str", "th", "tr"];
const VOWELS = ["a", "e", "i", "o", "u", "ai", "ea", "ou", "io"];
const CODAS = ["", "", "", "n", "r", "s", "t", "l", "m", "nd", "st", "ck", "ng"];
const syllable = () => pick(ONSETS) + pick(VOWELS) + pick(CODAS);
const words: string[] = [...COMMON];
const seen = new Set<string>(words);
while (words.length < VOCABULARY) {
  const word = Array.from({ length: 1 + Math.floor(rand() * 4) }, syllable).join("");
  if (word.length >= 3 && !seen.has(word)) words.push(word), seen.add(word);
}
// Zipf: word of rank r drawn with weight 1/r, as in natural text
const cumulative: number[] = [];
words.reduce((sum, _, rank) => (cumulative.push(sum + 1 / (rank + 1)), sum + 1 / (rank + 1)), 0);
function zipfWord(): string {
  const target = rand() * cumulative.at(-1)!;
  let low = 0;
  let high = cumulative.length - 1;
  while (low < high) {
    const mid = (low + high) >> 1;
    if (cumulative[mid]! < target) low = mid + 1;
    else high = mid;
  }
  return words[low]!;
}
const sentence = (n: number) => Array.from({ length: n }, zipfWord).join(" ");

function generateVault(dir: string): number {
  const paths = Array.from({ length: DOCUMENTS }, (_, i) => `${CATEGORIES[i % CATEGORIES.length]}/${String(i).padStart(5, "0")}-${words[i % VOCABULARY]}`);
  let bytes = 0;
  for (const [i, path] of paths.entries()) {
    const category = path.split("/")[0];
    const extra =
      category === "decisions" ? `adr: ${i}\nstatus: ${pick(["accepted", "proposed", "superseded"])}\ndate: 2026-11-21\n` :
      category === "rules" ? `domain: ${pick(["security", "api", "data", "testing"])}\ntier: ${1 + (i % 4)}\n` :
      category === "services" ? `service: svc-${i}\n` : "";
    const sections = Array.from({ length: 3 + Math.floor(rand() * 5) }, () => {
      const links = Array.from({ length: Math.floor(rand() * 3) }, () => `[[${pick(paths)}]]`).join(" ");
      return `## ${sentence(2 + Math.floor(rand() * 3))}\n\n${sentence(40 + Math.floor(rand() * 80))} ${links}\n\n${sentence(20 + Math.floor(rand() * 40))}\n`;
    });
    const title = sentence(3 + Math.floor(rand() * 4));
    const source = `---\ntitle: ${title}\nsummary: ${sentence(12)}\n${extra}---\n\n# ${title}\n\n${sections.join("\n")}`;
    mkdirSync(join(dir, category!), { recursive: true });
    writeFileSync(join(dir, `${path}.md`), source);
    bytes += source.length;
  }
  return bytes;
}

function queries(count: number): { query: string; category?: string }[] {
  const rankIn = (from: number, to: number) => words[from + Math.floor(rand() * (to - from))]!;
  const typo = (word: string) => {
    const at = 1 + Math.floor(rand() * (word.length - 2));
    return word.slice(0, at) + (word[at] === "a" ? "e" : "a") + word.slice(at + 1);
  };
  const kinds = [
    () => rankIn(COMMON.length, 300), // a frequent word: matches thousands of documents
    () => rankIn(300, 3_000),
    () => rankIn(3_000, VOCABULARY), // a rare word
    () => `${rankIn(COMMON.length, 500)} ${rankIn(300, 3_000)}`,
    () => `how does ${rankIn(COMMON.length, 1_000)} work with ${rankIn(300, 5_000)}`, // a question
    () => rankIn(300, 3_000).slice(0, 4), // a prefix
    () => typo(rankIn(300, 5_000)), // a typo
  ];
  return Array.from({ length: count }, (_, i) => ({ query: pick(kinds)(), ...(i % 4 === 0 ? { category: pick(CATEGORIES) } : {}) }));
}

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
const ms = (value: number) => `${value.toFixed(value < 10 ? 2 : 0)} ms`;
const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;

const root = mkdtempSync(join(tmpdir(), "core-vault-bench-"));
try {
  const dir = join(root, "vault");
  const bytes = generateVault(dir);
  console.log(`vault: ${DOCUMENTS} documents, ${mib(bytes)} of markdown in ${dir}`);

  gc();
  const heapBefore = process.memoryUsage().heapUsed;
  const builds: number[] = [];
  let vault!: Vault;
  for (let run = 0; run < 3; run++) {
    vault?.close();
    const started = performance.now();
    vault = await Vault.open(dir, { watch: false });
    builds.push(performance.now() - started);
  }
  gc();
  const heapIndex = process.memoryUsage().heapUsed - heapBefore;

  const warmup = queries(300);
  for (const { query, category } of warmup) vault.search(query, { limit: 10, category: category as never });
  const timings: number[] = [];
  let results = 0;
  for (const { query, category } of queries(QUERIES)) {
    const started = performance.now();
    results += vault.search(query, { limit: 10, category: category as never }).length;
    timings.push(performance.now() - started);
  }
  timings.sort((a, b) => a - b);

  const server = await listen(createApp({ vault, logger: silentLogger() }), 0, "127.0.0.1");
  const http: number[] = [];
  for (const [i, { query, category }] of queries(HTTP_QUERIES + 50).entries()) {
    const started = performance.now();
    const response = await fetch(`${server.url}/mcp`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: i, method: "tools/call", params: { name: "search_docs", arguments: { query, ...(category ? { category } : {}) } } }),
    });
    await response.json();
    if (i >= 50) http.push(performance.now() - started);
  }
  await server.close();
  http.sort((a, b) => a - b);

  console.log(`\nfull index (read, parse, index), best of 3:  ${ms(Math.min(...builds))}   (runs: ${builds.map(ms).join(", ")})   target < 5000 ms`);
  console.log(`search in process, ${QUERIES} queries:        p50 ${ms(percentile(timings, 50))}   p99 ${ms(percentile(timings, 99))}   max ${ms(timings.at(-1)!)}   target p99 < 5 ms   (${(results / QUERIES).toFixed(1)} results per query)`);
  console.log(`search_docs over HTTP (JSON-RPC), ${HTTP_QUERIES}:   p50 ${ms(percentile(http, 50))}   p99 ${ms(percentile(http, 99))}`);
  console.log(`heap held by the documents and index:      ${mib(heapIndex)}   (process RSS ${mib(process.memoryUsage().rss)})`);
  vault.close();
} finally {
  rmSync(root, { recursive: true, force: true });
}
