import { describe, expect, it } from "vitest";
import { waitForApproval } from "../src/device-login.js";
import { CliFailure } from "../src/failures.js";
import { Unreachable } from "../src/http.js";
import type { TokenAnswer } from "../src/iam-client.js";

const TOKENS = { access_token: "a", token_type: "bearer", expires_in: 3600, refresh_token: "r" };
const pending: TokenAnswer = { error: "authorization_pending", status: 400 };
const slowDown: TokenAnswer = { error: "slow_down", status: 400 };
const FIVE_MINUTES = 300_000;

/**
 * The polling rules of spec §7.3 and §8 on a virtual clock, so the 5-minute limit is checked at its
 * exact edge (the end-to-end rows are in login.test.ts).
 */
function scenario(answers: (at: number) => TokenAnswer | Error, intervalSeconds = 5) {
  let now = 0;
  const polls: number[] = [];
  const run = waitForApproval({
    poll: async () => {
      polls.push(now);
      const answer = answers(now);
      if (answer instanceof Error) throw answer;
      return answer;
    },
    intervalSeconds,
    limitMs: FIVE_MINUTES,
    clock: { now: () => now, sleep: async (ms) => void (now += ms) },
    iamUrl: "http://iam.test",
  });
  return { run, polls, elapsed: () => now };
}

const failureOf = async (promise: Promise<unknown>) => {
  const err = await promise.then(() => null, (e: unknown) => e);
  expect(err).toBeInstanceOf(CliFailure);
  return err as CliFailure;
};

describe("waitForApproval", () => {
  it("polls every interval while authorization_pending, and returns the tokens", async () => {
    const s = scenario((at) => (at < 20_000 ? pending : { tokens: TOKENS }));
    expect(await s.run).toEqual(TOKENS);
    expect(s.polls).toEqual([5_000, 10_000, 15_000, 20_000]);
  });

  it("waits the interval before the first poll", async () => {
    const s = scenario(() => ({ tokens: TOKENS }), 7);
    await s.run;
    expect(s.polls).toEqual([7_000]);
  });

  it("slow_down adds 5 seconds to this and every later interval", async () => {
    const s = scenario((at) => (at === 5_000 || at === 15_000 ? slowDown : at >= 40_000 ? { tokens: TOKENS } : pending));
    await s.run;
    // 5 s, then 10 s, then 15 s after the second slow_down
    expect(s.polls).toEqual([5_000, 15_000, 30_000, 45_000]);
  });

  it("an approval seen at the last poll, at exactly 5 minutes, still logs in (just inside the limit)", async () => {
    const s = scenario((at) => (at < FIVE_MINUTES ? pending : { tokens: TOKENS }));
    expect(await s.run).toEqual(TOKENS);
    expect(s.polls.at(-1)).toBe(FIVE_MINUTES);
  });

  it("still pending at 5 minutes: Login timed out, and no poll after the limit (just outside)", async () => {
    const s = scenario(() => pending);
    const failure = await failureOf(s.run);
    expect(failure.message).toBe("Login timed out. Run: core login");
    expect(s.elapsed()).toBe(FIVE_MINUTES);
    expect(Math.max(...s.polls)).toBe(FIVE_MINUTES);
    expect(s.polls).toHaveLength(60);
  });

  it("an interval that does not divide 5 minutes: the last poll moves up to the limit", async () => {
    const s = scenario(() => pending, 7);
    await failureOf(s.run);
    expect(s.polls.at(-2)).toBe(294_000);
    expect(s.polls.at(-1)).toBe(FIVE_MINUTES);
  });

  it("expired_token: Code expired. Run: core login", async () => {
    const failure = await failureOf(scenario((at) => (at < 10_000 ? pending : { error: "expired_token", status: 400 })).run);
    expect(failure).toMatchObject({ code: "EXPIRED_TOKEN", message: "Code expired. Run: core login" });
  });

  it("access_denied: Access denied.", async () => {
    const failure = await failureOf(scenario(() => ({ error: "access_denied", status: 400 })).run);
    expect(failure).toMatchObject({ code: "ACCESS_DENIED", message: "Access denied." });
  });

  it("any other OAuth error ends the login with IAM's words", async () => {
    const failure = await failureOf(scenario(() => ({ error: "invalid_grant", description: "Unknown or already used device code", status: 400 })).run);
    expect(failure.message).toBe("IAM refused the device login: invalid_grant (Unknown or already used device code). Run: core login");
  });

  it("outlives two network failures in a row, not three", async () => {
    const twice = scenario((at) => (at === 5_000 || at === 10_000 ? new Unreachable("connection refused") : { tokens: TOKENS }));
    expect(await twice.run).toEqual(TOKENS);
    const thrice = scenario((at) => (at <= 15_000 ? new Unreachable("connection refused") : { tokens: TOKENS }));
    expect((await failureOf(thrice.run)).message).toBe("Lost contact with IAM at http://iam.test while waiting for approval (connection refused). Run: core login");
  });

  it("treats 5xx answers like network failures", async () => {
    const failure = await failureOf(scenario(() => ({ error: "HTTP 502", status: 502 })).run);
    expect(failure.code).toBe("IAM_UNREACHABLE");
  });
});
