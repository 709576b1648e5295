import SearchableMap from "minisearch/SearchableMap";

/** The indexed fields of a document and how much a match in each counts. */
export const FIELD_BOOSTS = { title: 4, headings: 2, summary: 1.5, body: 1 } as const;
export type Field = keyof typeof FIELD_BOOSTS;
const FIELDS = Object.keys(FIELD_BOOSTS) as Field[];
const BOOSTS = FIELDS.map((field) => FIELD_BOOSTS[field]);

/** BM25+ (Lv & Zhai 2011): term saturation k1, length normalization b, lower bound d. */
const BM25 = { k1: 1.2, b: 0.7, d: 0.5 };
/** a word the query only begins, or misspells, counts less than the word itself */
const PREFIX_WEIGHT = 0.375;
const FUZZY_WEIGHT = 0.45;
/** words one query term may expand to; the closest first */
const MAX_EXPANSIONS = 64;
/** prefix matching from three letters; one typo from five letters, two from ten */
const PREFIX_FROM = 3;
const fuzzyDistanceOf = (term: string) => (term.length >= 10 ? 2 : term.length >= 5 ? 1 : 0);

/**
 * English function words: about half of the words of running text, and worthless for ranking.
 * Leaving them out halves the index.
 */
const STOP_WORDS = new Set(
  ("a an the and or but nor of to in on at by for with from into onto as is are was were be been being " +
    "it its this that these those there here which who whom whose what when where why how if then than so " +
    "such do does did has have had having can could would should shall may might must will " +
    "i me my we us our you your he him his she her they them their also just very too about")
    .split(" "),
);

/** The words of a text: runs of letters and digits, in lower case. */
const wordsOf = (text: string): string[] => text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];

/** The words of a text as the index keeps them: lower case, letters and digits, no stop words. */
export function termsOf(text: string): string[] {
  return wordsOf(text).filter((word) => !STOP_WORDS.has(word));
}

/** the word number of a stop word: the one map lookup per word also tells stop words apart */
const STOP = -1;

// A posting packs document number, field and term frequency into one 31-bit integer, so a
// term's postings are one flat array of small integers: doc (19 bits), field (2), tf (10).
const TF_BITS = 10;
const TF_LIMIT = (1 << TF_BITS) - 1; // BM25 saturates long before
const FIELD_BITS = 2;
const MAX_DOCUMENTS = 1 << 19;
const pack = (doc: number, field: number, tf: number) => (((doc << FIELD_BITS) | field) << TF_BITS) | Math.min(tf, TF_LIMIT);
const docOf = (posting: number) => posting >>> (TF_BITS + FIELD_BITS);
const fieldOf = (posting: number) => (posting >>> TF_BITS) & ((1 << FIELD_BITS) - 1);
const tfOf = (posting: number) => posting & TF_LIMIT;

export interface FullTextHit {
  id: string;
  score: number;
}

export interface FullTextResult {
  hits: FullTextHit[];
  /** the indexed words the query matched (its own words, completions, corrections), best first */
  terms: string[];
}

/**
 * A BM25 inverted index over the four fields of vault documents, for a vault of tens of thousands
 * of documents: built in one pass per document with no per-word tree lookups, searched by adding
 * up flat posting lists. The word dictionary is MiniSearch's radix tree, which answers the prefix
 * and typo-tolerant lookups (ADR 0011). Removal leaves the postings in place and skips the
 * removed document; `wasteful` says when a rebuild would reclaim them.
 */
export class FullTextIndex {
  private readonly ids: (string | undefined)[] = [];
  private readonly numbers = new Map<string, number>();
  private readonly dictionary = new SearchableMap<number>();
  private readonly termNumbers = new Map<string, number>([...STOP_WORDS].map((word) => [word, STOP]));
  private readonly postings: number[][] = [];
  /** scratch space of add(): per word number, the field it was last counted in and its count */
  private readonly countedIn: number[] = [];
  /** scratch space of search(): the score of each document number, zero outside a search */
  private scores = new Float64Array(0);
  private readonly counts: number[] = [];
  private readonly lengths: number[][] = FIELDS.map(() => []);
  private readonly totalLengths = FIELDS.map(() => 0);
  private live = 0;
  private removed = 0;

  get size(): number {
    return this.live;
  }

  /** Whether removed documents hold more of the index than live ones, or numbers run out. */
  get wasteful(): boolean {
    return (this.removed > 1_000 && this.removed > this.live) || this.ids.length >= MAX_DOCUMENTS;
  }

  add(id: string, fields: Record<Field, string>): void {
    if (this.numbers.has(id)) this.remove(id);
    const doc = this.ids.length;
    this.ids.push(id);
    this.numbers.set(id, doc);
    FIELDS.forEach((field, f) => {
      // count each word's occurrences in this field by its number: one map lookup per word
      const stamp = (doc << FIELD_BITS) | f;
      const distinct: number[] = [];
      let length = 0;
      for (const word of wordsOf(fields[field])) {
        const number = this.termNumberOf(word);
        if (number === STOP) continue;
        length++;
        if (this.countedIn[number] === stamp) this.counts[number]!++;
        else {
          this.countedIn[number] = stamp;
          this.counts[number] = 1;
          distinct.push(number);
        }
      }
      for (const number of distinct) this.postings[number]!.push(pack(doc, f, this.counts[number]!));
      this.lengths[f]![doc] = length;
      this.totalLengths[f]! += length;
    });
    this.live++;
  }

  remove(id: string): void {
    const doc = this.numbers.get(id);
    if (doc === undefined) return;
    this.numbers.delete(id);
    this.ids[doc] = undefined;
    FIELDS.forEach((_, f) => (this.totalLengths[f]! -= this.lengths[f]![doc]!));
    this.live--;
    this.removed++;
  }

  /**
   * The best `limit` documents for the query (its words combined with OR), highest score first
   * and by id on a tie; `accept` filters documents before they compete for a place.
   */
  search(query: string, limit: number, accept: (id: string) => boolean = () => true): FullTextResult {
    if (this.scores.length < this.ids.length) this.scores = new Float64Array(Math.max(1024, this.ids.length * 2));
    const touched: number[] = [];
    const matched = new Map<string, number>(); // indexed word → its best weight
    for (const queryTerm of new Set(termsOf(query))) {
      for (const [term, weight] of this.expansionsOf(queryTerm)) {
        if (this.addScores(this.postings[this.termNumbers.get(term)!]!, weight, touched)) {
          matched.set(term, Math.max(weight, matched.get(term) ?? 0));
        }
      }
    }
    const hits: FullTextHit[] = [];
    for (const doc of touched) {
      const score = this.scores[doc]!;
      this.scores[doc] = 0;
      const id = this.ids[doc]!;
      if (hits.length === limit && !outranks(score, id, hits[limit - 1]!)) continue;
      if (!accept(id)) continue;
      const at = hits.findIndex((hit) => outranks(score, id, hit));
      hits.splice(at < 0 ? hits.length : at, 0, { id, score });
      if (hits.length > limit) hits.pop();
    }
    return { hits, terms: [...matched].sort((a, b) => b[1] - a[1]).map(([term]) => term) };
  }

  /** The indexed words a query word stands for, with their weights: itself, completions, corrections. */
  private expansionsOf(queryTerm: string): Map<string, number> {
    const expansions = new Map<string, number>();
    if (this.termNumbers.has(queryTerm)) expansions.set(queryTerm, 1);
    const candidates: [string, number][] = [];
    if (queryTerm.length >= PREFIX_FROM) {
      for (const [term] of this.dictionary.atPrefix(queryTerm)) {
        if (term !== queryTerm) candidates.push([term, (PREFIX_WEIGHT * queryTerm.length) / (queryTerm.length + 0.3 * (term.length - queryTerm.length))]);
      }
    }
    const distance = fuzzyDistanceOf(queryTerm);
    if (distance > 0) {
      for (const [term, [, edits]] of this.dictionary.fuzzyGet(queryTerm, distance)) {
        if (term !== queryTerm) candidates.push([term, (FUZZY_WEIGHT * queryTerm.length) / (queryTerm.length + edits)]);
      }
    }
    candidates.sort((a, b) => b[1] - a[1] || a[0].length - b[0].length);
    for (const [term, weight] of candidates) {
      if (expansions.size >= MAX_EXPANSIONS) break;
      if (!expansions.has(term)) expansions.set(term, weight);
    }
    return expansions;
  }

  /** Adds one word's BM25+ contribution to each live document it occurs in; false when none. */
  private addScores(postings: number[], weight: number, touched: number[]): boolean {
    const documentFrequency = FIELDS.map(() => 0);
    for (const posting of postings) {
      if (this.ids[docOf(posting)] !== undefined) documentFrequency[fieldOf(posting)]!++;
    }
    if (documentFrequency.every((n) => n === 0)) return false;
    const idf = documentFrequency.map((n) => Math.log(1 + (this.live - n + 0.5) / (n + 0.5)));
    const averageLength = this.totalLengths.map((total) => total / Math.max(1, this.live) || 1);
    for (const posting of postings) {
      const doc = docOf(posting);
      if (this.ids[doc] === undefined) continue;
      const f = fieldOf(posting);
      const tf = tfOf(posting);
      const norm = 1 - BM25.b + (BM25.b * this.lengths[f]![doc]!) / averageLength[f]!;
      const bm25 = idf[f]! * ((tf * (BM25.k1 + 1)) / (tf + BM25.k1 * norm) + BM25.d);
      if (this.scores[doc] === 0) touched.push(doc);
      this.scores[doc]! += weight * BOOSTS[f]! * bm25;
    }
    return true;
  }

  private termNumberOf(term: string): number {
    let number = this.termNumbers.get(term);
    if (number === undefined) {
      number = this.postings.length;
      this.postings.push([]);
      this.countedIn.push(-1);
      this.counts.push(0);
      this.termNumbers.set(term, number);
      this.dictionary.set(term, number);
    }
    return number;
  }
}

/** Higher score first; the smaller id first on a tie, so results are stable. */
function outranks(score: number, id: string, other: FullTextHit): boolean {
  return score > other.score || (score === other.score && id < other.id);
}
