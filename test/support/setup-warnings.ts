import { afterAll } from "vitest";

/**
 * Every test file fails when node-postgres had to queue a query behind another on one connection
 * (queries sent together inside a transaction): it warns that pg 9 will refuse them, and its queue
 * hides that the code meant them to run at once. The warning is emitted once per process, so it is
 * kept from the start of each file.
 */
const queued: string[] = [];
process.on("warning", (warning) => {
  if (warning.message.includes("already executing a query")) queued.push(warning.stack ?? warning.message);
});

afterAll(() => {
  if (queued.length > 0) throw new Error(`A query was sent on a connection still busy with another:\n${queued[0]}`);
});
