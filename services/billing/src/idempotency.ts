import { createHash } from "node:crypto";
import { PaymentPending } from "./collection.js";
import { and, eq, lt } from "drizzle-orm";
import { ApiError, newId, type Clock } from "@core/kit";
import type { Db } from "@core/storage";
import { idempotencyKeys } from "./db/schema.js";
import { LEASE_MS, whileRenewing } from "./leases.js";

/** How long a key is remembered (DESIGN §6.6, Stripe's rule). */
const KEEP_MS = 24 * 3_600_000;
/** The lease of a claim its request left (finished with an unknown payment outcome): free at once, and not a holder that died. */
const RELEASED = new Date(0);

export interface IdempotencyOptions {
  /** how long a claim holds unrenewed (`LEASE_MS`): a request that died frees its key within this */
  leaseMs?: number;
  /**
   * Called before a retry runs a request whose holder is gone (its lease ran out unrenewed): what
   * that process had in flight with the request key (a payment attempt, a refund) is asked about
   * now, since nobody is waiting for its answer any more.
   */
  onHolderGone?: (requestKey: string) => Promise<void>;
}

/** The answer a money-moving route gives, as it is stored for a replay. */
export interface RouteAnswer {
  status: number;
  body: unknown;
}

/** The outcome of running a request under its key: the answer, and whether it is a replay. */
export interface KeyedAnswer extends RouteAnswer {
  replayed: boolean;
}

const canonical = (value: unknown): string =>
  value === null || typeof value !== "object"
    ? JSON.stringify(value)
    : Array.isArray(value)
      ? `[${value.map(canonical).join(",")}]`
      : `{${Object.keys(value as object)
          .sort()
          .map((k) => `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k])}`)
          .join(",")}}`;

/** The request hash a key is stored with: the same request (its body, in any key order) hashes alike. */
export const requestHashOf = (request: unknown) => createHash("sha256").update(canonical(request)).digest("base64url");

/** 409 IDEMPOTENCY_KEY_IN_USE, with when to retry: the lease's end, which comes within a lease once its holder is gone. */
const keyInUse = (leftMs: number) =>
  new ApiError(409, "IDEMPOTENCY_KEY_IN_USE", "A request with this idempotency key is still being processed; retry shortly", null, { "retry-after": String(Math.max(1, Math.ceil(leftMs / 1000))) });

/** The stored refusal of a request whose effect is final: a declined payment is (DESIGN §6.6). */
const isStoredRefusal = (err: unknown): err is ApiError => err instanceof ApiError && err.status === 402;

/**
 * Stripe's idempotency rules for every request that moves money (DESIGN §6.6). The key is claimed
 * with a short lease before the effect starts, renewed while it runs (`whileRenewing`), and
 * completed with the answer: a live request is never taken over however slow it is, and one whose
 * process died frees its key within a lease (15 s), its retry then asking at once about the payment
 * it left in flight (`onHolderGone`). The effect is given the
 * record's request key, drawn when the key was claimed: what the request makes (its invoice) carries
 * it, so a retry after a crash, or after an unknown payment outcome, finds it again instead of
 * making another, and a key claimed anew after 24 hours is a new request. Same key and body: the
 * stored answer again. Same key, other body: 422 IDEMPOTENCY_KEY_REUSED. Same key while the first
 * runs: 409 IDEMPOTENCY_KEY_IN_USE. Refusals that changed nothing release the claim; a decline (402)
 * is stored; a payment whose outcome is unknown (503 PAYMENT_PENDING, DESIGN §6.9) keeps the claim
 * without its lease, so the retry runs the effect again and answers what the payment came to.
 * Without a key the effect runs once, with a request key of its own.
 */
export class IdempotencyKeys {
  private readonly leaseMs: number;

  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly options: IdempotencyOptions = {},
  ) {
    this.leaseMs = options.leaseMs ?? LEASE_MS;
  }

  async run(scope: { caller: string; route: string; key: string | undefined; request: unknown }, effect: (requestKey: string) => Promise<RouteAnswer>): Promise<KeyedAnswer> {
    if (!scope.key) return { ...(await effect(newId("req"))), replayed: false };
    const claim = await this.claim(scope.caller, scope.route, scope.key, requestHashOf(scope.request));
    if ("answer" in claim) return { ...claim.answer, replayed: true };
    const where = and(eq(idempotencyKeys.caller, scope.caller), eq(idempotencyKeys.route, scope.route), eq(idempotencyKeys.key, scope.key));
    if (claim.holderGone) await this.options.onHolderGone?.(claim.requestKey);
    let answer: RouteAnswer;
    try {
      // the claim is renewed while the effect runs: a slow request keeps its key, a dead one frees it within a lease
      let held = claim.lockedUntil;
      answer = await whileRenewing(
        this.leaseMs,
        async () => {
          const until = new Date(this.clock.now().getTime() + this.leaseMs);
          const [renewed] = await this.db
            .update(idempotencyKeys)
            .set({ lockedUntil: until })
            .where(and(where, eq(idempotencyKeys.state, "in_progress"), eq(idempotencyKeys.lockedUntil, held)))
            .returning({ key: idempotencyKeys.key });
          if (renewed) held = until;
          return renewed !== undefined;
        },
        () => effect(claim.requestKey),
      );
    } catch (err) {
      if (isStoredRefusal(err)) {
        const body = { error: { code: err.code, message: err.message, details: err.details } };
        await this.db.update(idempotencyKeys).set({ state: "completed", responseStatus: err.status, responseBody: body }).where(where);
      } else if (err instanceof PaymentPending) {
        // the key stays the request's: its retry finds the invoice and answers what it came to
        await this.db.update(idempotencyKeys).set({ lockedUntil: RELEASED }).where(and(where, eq(idempotencyKeys.state, "in_progress")));
      } else {
        // nothing was done, or nothing that a retry would repeat: the key is free again
        await this.db.delete(idempotencyKeys).where(and(where, eq(idempotencyKeys.state, "in_progress")));
      }
      throw err;
    }
    await this.db.update(idempotencyKeys).set({ state: "completed", responseStatus: answer.status, responseBody: answer.body as object }).where(where);
    return { ...answer, replayed: false };
  }

  /**
   * Claims the key for this request, or answers what it came to. A claim whose lease ran out is taken
   * over: `holderGone` when its holder stopped renewing it (it died), not when it left it on purpose.
   */
  private async claim(caller: string, route: string, key: string, requestHash: string): Promise<{ requestKey: string; lockedUntil: Date; holderGone: boolean } | { answer: RouteAnswer }> {
    for (let attempt = 0; attempt < 5; attempt++) {
      const now = this.clock.now();
      const lockedUntil = new Date(now.getTime() + this.leaseMs);
      const [claimed] = await this.db
        .insert(idempotencyKeys)
        .values({ caller, route, key, requestHash, state: "in_progress", lockedUntil, requestKey: newId("req"), createdAt: now, expiresAt: new Date(now.getTime() + KEEP_MS) })
        .onConflictDoNothing()
        .returning({ requestKey: idempotencyKeys.requestKey });
      if (claimed) return { requestKey: claimed.requestKey, lockedUntil, holderGone: false };
      const where = and(eq(idempotencyKeys.caller, caller), eq(idempotencyKeys.route, route), eq(idempotencyKeys.key, key));
      const [held] = await this.db.select().from(idempotencyKeys).where(where);
      if (!held) continue;
      if (held.expiresAt <= now) {
        // a day old: the key is forgotten, and may start something new
        await this.db.delete(idempotencyKeys).where(and(where, eq(idempotencyKeys.expiresAt, held.expiresAt)));
        continue;
      }
      if (held.requestHash !== requestHash) {
        throw new ApiError(422, "IDEMPOTENCY_KEY_REUSED", "This idempotency key was used with another request body; use a new key for a new request");
      }
      if (held.state === "completed") return { answer: { status: held.responseStatus!, body: held.responseBody } };
      if (held.lockedUntil > now) throw keyInUse(held.lockedUntil.getTime() - now.getTime());
      // the first attempt stopped mid-way (it died and its lease ran out, or it left an unknown payment outcome): this retry takes over
      const [taken] = await this.db
        .update(idempotencyKeys)
        .set({ lockedUntil })
        .where(and(where, eq(idempotencyKeys.state, "in_progress"), eq(idempotencyKeys.lockedUntil, held.lockedUntil)))
        .returning({ requestKey: idempotencyKeys.requestKey });
      if (taken) return { requestKey: taken.requestKey, lockedUntil, holderGone: held.lockedUntil.getTime() !== RELEASED.getTime() };
    }
    throw keyInUse(this.leaseMs);
  }

  /** Forgets keys older than a day (the worker calls it now and then). */
  async prune(): Promise<void> {
    await this.db.delete(idempotencyKeys).where(lt(idempotencyKeys.expiresAt, this.clock.now()));
  }
}
