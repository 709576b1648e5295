/**
 * Leases: claims with an expiry that a process holds while it works (an idempotency key, a
 * subscription's change, a payment attempt in flight), in the database so every replica sees them.
 * A lease is short and renewed while its holder runs (docs/vault/cross-cutting/security.md, Billing):
 * a live holder keeps it however long its work takes (a slow provider), and one that died frees it
 * within one lease, so whoever comes next (the client's retry, another replica's worker) takes over
 * in seconds rather than waiting out a long expiry.
 */

/** How long a lease holds without being renewed: a crashed holder frees it within this. */
export const LEASE_MS = 15_000;

/** How many renewals a lease gets within its length: one may be late or fail, and the next still comes in time. */
const RENEWALS_PER_LEASE = 3;

/**
 * Runs `work` while renewing its lease every third of `leaseMs` (real time: a heartbeat, whatever the
 * injected clock says; each renewal writes an expiry from that clock). `renew` answers false when the
 * lease is no longer the holder's (another took it over after it expired): renewing stops, and the
 * work goes on as it would have without a heartbeat, settled by the guards it has anyway (provider
 * keys, guarded transitions). A renewal that fails (the database away for a moment) is tried again at
 * the next beat. When `work` ends no renewal is in flight any more, so what the holder writes next
 * (its answer, the release) comes after the last renewal.
 */
export async function whileRenewing<T>(leaseMs: number, renew: () => Promise<boolean>, work: () => Promise<T>): Promise<T> {
  let lost = false;
  let beat: Promise<void> = Promise.resolve();
  const timer = setInterval(
    () => {
      beat = beat.then(async () => {
        if (lost) return;
        try {
          lost = !(await renew());
        } catch {
          // the next beat tries again: one missed renewal still leaves two thirds of the lease
        }
      });
    },
    Math.max(Math.floor(leaseMs / RENEWALS_PER_LEASE), 1),
  );
  timer.unref();
  try {
    return await work();
  } finally {
    clearInterval(timer);
    lost = true;
    await beat;
  }
}
