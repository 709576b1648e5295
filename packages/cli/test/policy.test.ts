import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { principalOf, type SignedUp } from "../../../services/iam/test/support/harness.js";
import { heldBackMember } from "../../../services/iam/test/support/policy.js";
import { buildCli, freshHome, removeScratchDirs, runCli, STACK_FRAME, type Finished } from "./support/cli.js";
import { startLiveBilling, type LiveBilling } from "./support/live-billing.js";
import { userWithPlatform } from "./support/live-iam.js";

const TWO_FACTOR_MESSAGE = "Your organization requires two-factor authentication: set it up, or sign in again with your code";

/**
 * The real `core` process of a member held back by their organization's two-factor policy
 * (docs/vault/concepts/second-factors-and-policy.md), against the real IAM and billing: every
 * command that is refused says what the policy asks and which IAM page to open, never that the
 * person is in no organization.
 */
describe("core for a member held back by a policy", { timeout: 90_000 }, () => {
  let core: string;
  let live: LiveBilling;
  let member: SignedUp;
  let platformId: string;
  beforeAll(async () => {
    [core, live] = await Promise.all([buildCli(), startLiveBilling()]);
    const owner = await userWithPlatform(live.iam);
    platformId = owner.platformId;
    const { orgId } = await principalOf(live.iam, owner);
    ({ member } = await heldBackMember(live.iam, { orgId: orgId!, owner }));
  });
  afterAll(async () => {
    await live?.close();
    removeScratchDirs();
  });

  const enrolPage = () => `${live.iamUrl}/account/two-factor?required=1`;
  const run = (args: string[]) => runCli(core, args, { env: { CORE_HOME: freshHome(), CORE_TOKEN: member.token, CORE_IAM_URL: live.iamUrl, CORE_BILLING_URL: live.url } });
  const failed = (done: Finished) => {
    expect(done.code, done.stdout).toBe(1);
    expect(done.stderr).not.toMatch(STACK_FRAME);
    expect(done.stderr).not.toContain("no organization");
    return done.stderr.trim();
  };

  it("core billing status --platform: billing's refusal, with the policy's message and the page to open", async () => {
    const text = failed(await run(["billing", "status", "--platform", platformId]));
    expect(text).toContain(`FORBIDDEN: ${TWO_FACTOR_MESSAGE} (HTTP 403)`);
    expect(text).toContain(`Open ${enrolPage()} to set it up, then log in again: core login`);
    // the generic hint about billing:read would send the person to the wrong place
    expect(text).not.toContain("billing:read");
  });

  it("core billing status --json carries the policy in the error's details", async () => {
    const done = await run(["billing", "status", "--platform", platformId, "--json"]);
    expect(done.code).toBe(1);
    expect(JSON.parse(done.stdout).error).toMatchObject({ code: "FORBIDDEN", details: { policy: "TWO_FACTOR_REQUIRED", location: enrolPage() } });
  });

  it("core whoami, and core billing status, which asks IAM for the platform first: IAM's refusal, with the page to open", async () => {
    for (const args of [["whoami"], ["billing", "status"]]) {
      const text = failed(await run(args));
      expect(text, args.join(" ")).toContain(TWO_FACTOR_MESSAGE);
      expect(text, args.join(" ")).toContain(`Open ${enrolPage()} to set it up, then log in again: core login`);
    }
  });

  it("core login --token of a held-back session stores nothing and says why", async () => {
    const home = freshHome();
    const done = await runCli(core, ["login", "--token", member.token, "--iam-url", live.iamUrl], { env: { CORE_HOME: home } });
    const text = failed(done);
    expect(text).toContain(TWO_FACTOR_MESSAGE);
    expect(text).toContain(enrolPage());
    expect(text).toContain("Nothing was stored");
    const after = await runCli(core, ["status"], { env: { CORE_HOME: home } });
    expect(after.stdout + after.stderr).toMatch(/not logged in/i);
  });
});
