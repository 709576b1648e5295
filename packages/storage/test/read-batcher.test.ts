import { describe, expect, it } from "vitest";
import { ReadBatcher } from "@core/storage";

/** A reader that records each query's keys and answers when told. */
function recordingReader() {
  const queries: { keys: string[]; answer: (rows: Map<string, string>) => void; fail: (err: Error) => void }[] = [];
  const read = (keys: string[]) => new Promise<Map<string, string>>((resolve, reject) => queries.push({ keys, answer: resolve, fail: reject }));
  return { queries, read };
}
const turn = () => new Promise((r) => setImmediate(r));

describe("ReadBatcher", () => {
  it("answers the keys asked in one turn with one query, each key once, each caller its own row", async () => {
    const { queries, read } = recordingReader();
    const batcher = new ReadBatcher(read);
    const answers = Promise.all(["a", "b", "a", "c"].map((key) => batcher.load(key)));
    await turn();
    expect(queries.map((q) => q.keys)).toEqual([["a", "b", "c"]]);
    queries[0]!.answer(new Map([["a", "row a"], ["c", "row c"]]));
    // a key the query did not answer has no row
    expect(await answers).toEqual(["row a", undefined, "row a", "row c"]);
  });

  it("never adds a key to a query already sent: a later ask waits for a query of its own", async () => {
    const { queries, read } = recordingReader();
    const batcher = new ReadBatcher(read);
    const first = batcher.load("a");
    await turn();
    const second = batcher.load("a");
    await turn();
    expect(queries.map((q) => q.keys)).toEqual([["a"], ["a"]]);
    queries[0]!.answer(new Map([["a", "before the write"]]));
    queries[1]!.answer(new Map([["a", "after the write"]]));
    expect([await first, await second]).toEqual(["before the write", "after the write"]);
  });

  it("splits a turn's keys into queries of at most maxBatch", async () => {
    const { queries, read } = recordingReader();
    const batcher = new ReadBatcher(read, 2);
    const answers = Promise.all(["a", "b", "c", "d", "e"].map((key) => batcher.load(key)));
    await turn();
    expect(queries.map((q) => q.keys)).toEqual([["a", "b"], ["c", "d"], ["e"]]);
    for (const q of queries) q.answer(new Map(q.keys.map((k) => [k, k.toUpperCase()])));
    expect(await answers).toEqual(["A", "B", "C", "D", "E"]);
  });

  it("fails every caller of a failed query, and only those", async () => {
    const { queries, read } = recordingReader();
    const batcher = new ReadBatcher(read, 1);
    const a = batcher.load("a");
    const b = batcher.load("b");
    await turn();
    queries[0]!.fail(new Error("connection lost"));
    queries[1]!.answer(new Map([["b", "row b"]]));
    await expect(a).rejects.toThrow("connection lost");
    expect(await b).toBe("row b");
    // the batcher goes on working after a failure
    const c = batcher.load("c");
    await turn();
    queries[2]!.answer(new Map([["c", "row c"]]));
    expect(await c).toBe("row c");
  });
});
