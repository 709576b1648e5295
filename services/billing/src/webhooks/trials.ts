import { and, eq, gt, isNotNull, isNull, lte, ne, or } from "drizzle-orm";
import type { Db } from "@core/storage";
import { subscriptions } from "../db/schema.js";
import { subscriptionJson } from "../subscriptions.js";
import { emitEvent } from "./outbox.js";

/** `subscription.trial_will_end` is written this long before a trial ends (DESIGN §6.8), as Stripe does. */
export const TRIAL_WILL_END_AHEAD_MS = 3 * 24 * 3600_000;

/**
 * Writes `subscription.trial_will_end` once per trial end, for trials ending within three days of
 * billing time `now`. Every replica's worker runs it; the conditional update that remembers the trial
 * end makes one of them write the event.
 */
export async function noteTrialsEnding(db: Db, now: Date): Promise<number> {
  const soon = new Date(now.getTime() + TRIAL_WILL_END_AHEAD_MS);
  const ending = await db
    .select({ id: subscriptions.id, trialEnd: subscriptions.trialEnd })
    .from(subscriptions)
    .where(
      and(
        eq(subscriptions.current, true),
        eq(subscriptions.status, "trialing"),
        isNotNull(subscriptions.trialEnd),
        gt(subscriptions.trialEnd, now),
        lte(subscriptions.trialEnd, soon),
        or(isNull(subscriptions.trialWillEndNotedFor), ne(subscriptions.trialWillEndNotedFor, subscriptions.trialEnd)),
      ),
    );
  let written = 0;
  for (const { id, trialEnd } of ending) {
    await db.transaction(async (tx) => {
      const [noted] = await tx
        .update(subscriptions)
        .set({ trialWillEndNotedFor: trialEnd })
        .where(and(eq(subscriptions.id, id), or(isNull(subscriptions.trialWillEndNotedFor), ne(subscriptions.trialWillEndNotedFor, trialEnd!))))
        .returning();
      if (!noted) return;
      await emitEvent(tx, "subscription.trial_will_end", subscriptionJson(noted), now);
      written++;
    });
  }
  return written;
}
