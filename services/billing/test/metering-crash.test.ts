import { randomInt } from "node:crypto";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sql } from "drizzle-orm";
import { rowsOf, testDatabases } from "@core/storage";
import { startBillingChild } from "./support/child.js";
import { startBilling, type Billing } from "./support/billing.js";

/**
 * Crash safety of ingestion (DESIGN §6.5), on PostgreSQL: billing runs in a child process that is
 * killed with SIGKILL at random moments while batches are in flight. The client sends every batch
 * that got no answer again to the next child. In the end every event is counted exactly once: the
 * batches that committed before a kill answer `duplicate` on their retry, the ones that did not are
 * counted by it.
 */

const child = fileURLToPath(new URL("./support/ingest-child.ts", import.meta.url));
const postgres = testDatabases().find((d) => d.name === "postgres");
/** at most this many kills; the run stops killing once a child gets through every batch left */
const KILLS = 6;
const BATCHES = 48;
const EVENTS_PER_BATCH = 250;

describe.skipIf(!postgres)("ingestion killed with SIGKILL (postgres)", () => {
  let b: Billing;
  beforeAll(async () => {
    b = await startBilling(postgres!);
  });
  afterAll(() => b?.close());

  const startChild = () => startBillingChild(b, child);

  it("counts every event exactly once when the client re-sends every unanswered batch", async () => {
    const platformId = await b.newPlatform();
    const operator = b.as.operator();
    // the child keeps the wall clock's time
    const now = Math.floor(Date.now() / 1000);
    // overlapping batches: a batch repeats a few events of the one before, as a client's retry would
    const pool = Array.from({ length: BATCHES * EVENTS_PER_BATCH }, (_, i) => ({
      id: `crash-${i}`,
      platformId,
      tenantId: `t${i % 11}`,
      stackId: `s${i % 5}`,
      meter: ["api_requests", "compute_minutes", "storage_gb_hours"][i % 3]!,
      quantity: `${(i % 97) + 1}.${String(i % 1000).padStart(3, "0")}`,
      timestamp: now - (i % 3600),
    }));
    const batches = Array.from({ length: BATCHES }, (_, k) => [...pool.slice(k * EVENTS_PER_BATCH, (k + 1) * EVENTS_PER_BATCH), ...(k > 0 ? pool.slice(k * EVENTS_PER_BATCH - 20, k * EVENTS_PER_BATCH) : [])]);
    const headers = { ...operator, "content-type": "application/json" };

    let pending = batches.map((events, index) => ({ index, body: JSON.stringify({ events }) }));
    const answered = new Map<number, { accepted: number; duplicates: number; rejected: number }>();
    let kills = 0;
    let outran = false;
    let unanswered = 0;
    while (pending.length > 0) {
      const running = await startChild();
      const killAt = kills < KILLS && !outran ? randomInt(50, 500) : null;
      let killed = false;
      const timer =
        killAt === null
          ? null
          : setTimeout(() => {
              killed = true;
              running.process.kill("SIGKILL");
            }, killAt);
      const exited = new Promise((resolve) => running.process.on("exit", resolve));
      const left: typeof pending = [];
      // two clients at once, so a kill finds transactions in flight
      const queue = [...pending];
      await Promise.all(
        [0, 1].map(async () => {
          for (let next = queue.shift(); next; next = queue.shift()) {
            let answer: { status: number; body: { accepted: number; duplicates: number; rejected: number } };
            try {
              const res = await fetch(`${running.url}/usage/events`, { method: "POST", headers, body: next.body });
              answer = { status: res.status, body: (await res.json()) as { accepted: number; duplicates: number; rejected: number } };
            } catch {
              // no answer: the batch may or may not have committed; it goes to the next child
              left.push(next);
              unanswered++;
              continue;
            }
            expect(answer.status).toBe(200);
            answered.set(next.index, answer.body);
          }
        }),
      );
      if (timer) clearTimeout(timer);
      if (killed) kills++;
      // a child that finished everything before its kill leaves nothing to retry: the run is shorter, not wrong
      if (!killed && killAt !== null) outran = true;
      running.process.kill("SIGKILL");
      await exited;
      pending = left.sort((x, y) => x.index - y.index);
    }

    expect(unanswered).toBeGreaterThan(0);
    expect(answered.size).toBe(BATCHES);
    for (const answer of answered.values()) expect(answer.rejected).toBe(0);
    // each distinct event stored once, with its own quantity
    const [stored] = rowsOf<{ n: string | number; total: string }>(
      await b.db.execute(sql`select count(*) as n, coalesce(sum(quantity), 0)::text as total from billing.usage_events where platform_id = ${platformId}`),
    );
    expect(Number(stored!.n)).toBe(pool.length);
    const expected = (meter: string) => pool.filter((e) => e.meter === meter).reduce((sum, e) => sum + Math.round(Number(e.quantity) * 1000), 0);
    const current = (await b.call("GET", `/usage/current?platformId=${platformId}`, { headers: operator })).body;
    for (const m of current.meters as { meter: string; quantity: string }[]) expect(Math.round(Number(m.quantity) * 1000)).toBe(expected(m.meter));
    const recount = (await b.call("GET", `/operator/usage/reconcile?platformId=${platformId}`, { headers: operator })).body;
    expect(recount.consistent).toBe(true);
    // a retry that found more duplicates than the planned overlap re-sent a batch that had committed unanswered
    const committedUnanswered = [...answered.entries()].filter(([index, a]) => a.duplicates > (index > 0 ? 20 : 0)).length;
    console.log(`crash test: ${kills} kills, ${unanswered} unanswered sends, ${committedUnanswered} batches committed before a kill cut their answer, ${pool.length} events counted once`);
  }, 180_000);
});
