import { failures } from "./failures.js";
import { Unreachable } from "./http.js";
import type { TokenAnswer, Tokens } from "./iam-client.js";

/** RFC 8628 §3.5: each `slow_down` adds 5 seconds to the interval, for good (spec §7.3, §8). */
export const SLOW_DOWN_SECONDS = 5;
/** RFC 8628 §3.2: the interval when the server names none. */
const DEFAULT_INTERVAL_SECONDS = 5;
/** Network failures or 5xx answers in a row that a login survives (RFC 8628 §3.5 asks for patience). */
const TRANSIENT_FAILURES_TOLERATED = 3;

export interface PollClock {
  now(): number;
  sleep(ms: number): Promise<void>;
}

/**
 * Polls the token endpoint until the user answers in the browser (spec §7.3): every `interval`
 * seconds while `authorization_pending`, 5 s slower after each `slow_down`, and never past
 * `limitMs` (spec §8: 5 minutes). The last poll happens at the limit, so an approval given just
 * before it still counts.
 */
export async function waitForApproval(options: {
  poll: () => Promise<TokenAnswer>;
  intervalSeconds: number;
  limitMs: number;
  clock: PollClock;
  iamUrl: string;
  onSlowDown?: (intervalSeconds: number) => void;
}): Promise<Tokens> {
  const { poll, clock } = options;
  const deadline = clock.now() + options.limitMs;
  let interval = options.intervalSeconds > 0 ? options.intervalSeconds : DEFAULT_INTERVAL_SECONDS;
  let transientFailures = 0;

  for (;;) {
    const remaining = deadline - clock.now();
    const lastPoll = remaining <= interval * 1000;
    await clock.sleep(lastPoll ? Math.max(0, remaining) : interval * 1000);

    let answer: TokenAnswer;
    try {
      answer = await poll();
    } catch (err) {
      if (!(err instanceof Unreachable)) throw err;
      if (++transientFailures >= TRANSIENT_FAILURES_TOLERATED) throw failures.lostContact(options.iamUrl, err.reason);
      if (lastPoll) throw failures.loginTimedOut();
      continue;
    }
    if ("tokens" in answer) return answer.tokens;

    if (answer.status >= 500) {
      if (++transientFailures >= TRANSIENT_FAILURES_TOLERATED) throw failures.lostContact(options.iamUrl, answer.error);
    } else {
      transientFailures = 0;
      switch (answer.error) {
        case "authorization_pending":
          break;
        case "slow_down":
          interval += SLOW_DOWN_SECONDS;
          options.onSlowDown?.(interval);
          break;
        case "expired_token":
          throw failures.codeExpired();
        case "access_denied":
          throw failures.accessDenied();
        default:
          throw failures.deviceLoginRefused(answer.error, answer.description);
      }
    }
    if (lastPoll) throw failures.loginTimedOut();
  }
}
