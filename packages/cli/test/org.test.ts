import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, createApiKey, signUp, uniqueSlug } from "../../../services/iam/test/support/harness.js";
import { buildCli, CoreProcess, freshHome, removeScratchDirs, runCli } from "./support/cli.js";
import { approve, startLiveIam, type LiveIam } from "./support/live-iam.js";

/** `core org list` and `core org switch` as real processes against a live IAM and platform registry. */
describe("core org", () => {
  let core: string;
  let live: LiveIam;
  beforeAll(async () => {
    [core, live] = await Promise.all([buildCli(), startLiveIam({ deviceIntervalSeconds: 1 })]);
  });
  afterAll(async () => {
    await live?.close();
    removeScratchDirs();
  });

  const credentialsPath = (home: string) => join(home, "credentials.json");
  const stored = (home: string) => JSON.parse(readFileSync(credentialsPath(home), "utf8"));
  const runIn = (home: string, args: string[], env: Record<string, string> = {}) => runCli(core, args, { env: { CORE_HOME: home, ...env } });

  /** A person who set up two organizations (each with its platform), the second one last. */
  async function inTwo() {
    const person = await signUp(live.iam);
    const made = [];
    for (const label of ["first", "second"]) {
      const slug = uniqueSlug(label);
      const r = await call(live.iam, "POST", "/api/core/org-setup", { cookie: person.cookie, body: { name: `Org ${label}`, slug } });
      if (r.status !== 201) throw new Error(`org-setup refused: ${JSON.stringify(r.body)}`);
      made.push({ slug, platformId: r.body.platformId as string, orgId: r.body.orgId as string });
    }
    return { person, first: made[0]!, second: made[1]! };
  }

  async function loggedIn(person: { token: string }) {
    const home = freshHome();
    const cli = new CoreProcess(core, ["login", "--iam-url", live.iamUrl], { env: { CORE_HOME: home } });
    const [, userCode] = await cli.waitFor(/Your one-time code: ([A-Z]{4}-[A-Z]{4})/);
    await approve(live.iam, person, userCode!);
    const done = await cli.finished;
    if (done.code !== 0) throw new Error(`login failed: ${done.stderr}`);
    return home;
  }

  it("lists every organization with the role in it and marks the one the login acts in; --json is IAM's list", async () => {
    const { person, first, second } = await inTwo();
    const home = await loggedIn(person);
    const done = await runIn(home, ["org", "list"]);
    expect(done.code).toBe(0);
    const lines = done.stdout.trimEnd().split("\n");
    expect(lines[0]).toMatch(/^ +SLUG +NAME +ROLE +PLATFORM$/);
    // a new login acts in the oldest organization
    expect(lines[1]).toMatch(new RegExp(`^\\* +${first.slug} +Org first +owner +${first.platformId}$`));
    expect(lines[2]).toMatch(new RegExp(`^ +${second.slug} +Org second +owner +${second.platformId}$`));
    expect(lines[3]).toBe("* the organization this login acts in; change it with: core org switch <slug>");
    const json = JSON.parse((await runIn(home, ["org", "list", "--json"])).stdout);
    expect(json.data.map((m: { slug: string; active: boolean }) => [m.slug, m.active])).toEqual([
      [first.slug, true],
      [second.slug, false],
    ]);
  });

  it("switches: whoami, the stored login and a refreshed token all act in the chosen organization", async () => {
    const { person, second } = await inTwo();
    const home = await loggedIn(person);
    const done = await runIn(home, ["org", "switch", second.slug]);
    expect(done.code).toBe(0);
    expect(done.stdout.trim()).toBe(`Now acting in Org second (${second.slug}): platform ${second.platformId}, role owner.`);
    expect(stored(home)).toMatchObject({ platformId: second.platformId, role: "owner" });
    expect((await runIn(home, ["whoami"])).stdout).toContain(`Platform: ${second.platformId} (role: owner)`);
    expect((await runIn(home, ["org", "switch", second.slug])).stdout.trim()).toBe(`Already acting in Org second (${second.slug}): platform ${second.platformId}, role owner.`);

    // the access token runs out; core token refreshes it, and the new session keeps the choice
    const record = stored(home);
    writeFileSync(credentialsPath(home), JSON.stringify({ ...record, expiresAt: new Date(Date.now() - 1000).toISOString() }), { mode: 0o600 });
    const refreshed = await runIn(home, ["token"]);
    expect(refreshed.code).toBe(0);
    expect(refreshed.stdout.trim()).not.toBe(record.token);
    expect((await runIn(home, ["whoami"])).stdout).toContain(`Platform: ${second.platformId} (role: owner)`);
  });

  it("refuses an organization the person is not in, naming theirs; --json carries the code", async () => {
    const { person, first, second } = await inTwo();
    const home = await loggedIn(person);
    const done = await runIn(home, ["org", "switch", "someone-elses"]);
    expect(done.code).toBe(1);
    expect(done.stderr.trim()).toBe(`You are not a member of an organization "someone-elses". Yours: ${first.slug}, ${second.slug} (core org list).`);
    const json = await runIn(home, ["org", "switch", "someone-elses", "--json"]);
    expect(JSON.parse(json.stdout).error.code).toBe("NOT_A_MEMBER");
    expect(stored(home).platformId).toBe(first.platformId);
  });

  it("tells an API key login that a key cannot switch, and lists its organizations", async () => {
    const { person, first, second } = await inTwo();
    // made by the session that set up `second` and acts in it: the key acts there (ADR 0029)
    const { key } = await createApiKey(live.iam, person);
    const env = { CORE_TOKEN: key, CORE_IAM_URL: live.iamUrl };
    const home = freshHome();
    const listed = await runIn(home, ["org", "list"], env);
    expect(listed.code).toBe(0);
    expect(listed.stdout).toContain("* the organization this API key acts in");
    expect(listed.stdout).toMatch(new RegExp(`\\* +${second.slug} `));
    const done = await runIn(home, ["org", "switch", first.slug], env);
    expect(done.code).toBe(1);
    expect(done.stderr).toContain("An API key acts in the organization it was made in, so it cannot switch.");
  });

  it("sends a person in no organization to onboarding", async () => {
    const loner = await signUp(live.iam);
    const home = freshHome();
    mkdirSync(home, { recursive: true });
    const done = await runIn(home, ["org", "list"], { CORE_TOKEN: loner.token, CORE_IAM_URL: live.iamUrl });
    expect(done.code).toBe(0);
    expect(done.stdout.trim()).toBe(`You are in no organization yet: set one up at ${live.iamUrl}/onboarding, or accept an invitation.`);
  });
});
