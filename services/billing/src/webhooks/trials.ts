import { and, eq, gt, isNotNull, isNull, lte, ne, or } from "drizzle-orm";
import { subscriptions } from "../db/schema.js";
import type { Engine } from "../engine.js";
import { mailTrialEnding, type TrialCharge } from "../mail/messages.js";
import { upcomingInvoice } from "../upcoming.js";
import { subscriptionJson } from "../subscriptions.js";
import { emitEvent } from "./outbox.js";

/** `subscription.trial_will_end` is written this long before a trial ends (DESIGN §6.8), as Stripe does. */
export const TRIAL_WILL_END_AHEAD_MS = 3 * 24 * 3600_000;

/**
 * Writes `subscription.trial_will_end` once per trial end, for trials ending within three days of
 * billing time `now`, and mails the customer what will happen then (DESIGN §6.11), whether or not
 * any endpoint takes the event. Every replica's worker runs it; the conditional update that
 * remembers the trial end makes one of them write the event and the mail.
 */
export async function noteTrialsEnding(engine: Engine, now: Date): Promise<number> {
  const db = engine.db;
  const soon = new Date(now.getTime() + TRIAL_WILL_END_AHEAD_MS);
  const ending = await db
    .select({ id: subscriptions.id, platformId: subscriptions.platformId, trialEnd: subscriptions.trialEnd })
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
  for (const { id, platformId, trialEnd } of ending) {
    // what the trial's end will charge, read before the transaction (the upcoming invoice reads on its own)
    const charge = await trialChargeOf(engine, platformId);
    await db.transaction(async (tx) => {
      const [noted] = await tx
        .update(subscriptions)
        .set({ trialWillEndNotedFor: trialEnd })
        .where(and(eq(subscriptions.id, id), or(isNull(subscriptions.trialWillEndNotedFor), ne(subscriptions.trialWillEndNotedFor, trialEnd!))))
        .returning();
      if (!noted) return;
      await emitEvent(tx, "subscription.trial_will_end", subscriptionJson(noted), now);
      await mailTrialEnding(tx, engine, noted, charge);
      written++;
    });
  }
  return written;
}

/** The upcoming invoice's amount (the trial's first period); null when none is coming (no customer, a cancellation). */
async function trialChargeOf(engine: Engine, platformId: string): Promise<TrialCharge | null> {
  try {
    const upcoming = await upcomingInvoice(engine, platformId);
    return { amountDueCents: upcoming.amountDueCents, currency: upcoming.currency };
  } catch (err) {
    // the mail then names no amount; one platform's trouble never holds back the others' events and mail
    if ((err as { code?: string }).code !== "NO_UPCOMING_INVOICE") engine.logger.warn({ platformId, err: (err as Error).message }, "a trial's upcoming charge could not be priced for its mail");
    return null;
  }
}
