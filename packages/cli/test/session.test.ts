import { mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, createApiKey, freePort, operator, signUp } from "../../../services/iam/test/support/harness.js";
import { refresh } from "../../../services/iam/test/support/device.js";
import { buildCli, CoreProcess, freshHome, removeScratchDirs, runCli, STACK_FRAME } from "./support/cli.js";
import { approve, startLiveIam, userWithPlatform, whoamiOf, type LiveIam } from "./support/live-iam.js";

/** `core whoami`, `core status`, `core token` and `core logout` as real processes against a live IAM. */
describe("core whoami, status, token, logout", () => {
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
  const store = (home: string, record: object) => {
    mkdirSync(home, { recursive: true, mode: 0o700 });
    writeFileSync(credentialsPath(home), JSON.stringify(record), { mode: 0o600 });
  };
  const exists = (path: string) => statSync(path, { throwIfNoEntry: false }) !== undefined;
  /** `core <args>` with `CORE_HOME=home`. */
  const runIn = (home: string, args: string[], env: Record<string, string> = {}) => runCli(core, args, { env: { CORE_HOME: home, ...env } });
  const HOUR_AGO = () => new Date(Date.now() - 3_600_000).toISOString();

  /** A device login through the real CLI; answers the home it stored the credential in. */
  async function loggedIn(person?: { token: string; email: string }) {
    const who = person ?? (await signUp(live.iam));
    const home = freshHome();
    const cli = new CoreProcess(core, ["login", "--iam-url", live.iamUrl], { env: { CORE_HOME: home } });
    const [, userCode] = await cli.waitFor(/Your one-time code: ([A-Z]{4}-[A-Z]{4})/);
    await approve(live.iam, who, userCode!);
    const done = await cli.finished;
    if (done.code !== 0) throw new Error(`login failed: ${done.stderr}`);
    return { home, person: who };
  }

  describe("core whoami", () => {
    it("shows the email, platform and role IAM gives, and which credential it used", async () => {
      const ada = await userWithPlatform(live.iam);
      const { home } = await loggedIn(ada);
      const identity = (await whoamiOf(live.iam, stored(home).token)).body;
      const done = await runIn(home, ["whoami"]);
      expect(done.code).toBe(0);
      expect(done.stdout).toContain(`Logged in to ${live.iamUrl} as ${ada.email}`);
      expect(done.stdout).toContain(identity.platformId ? `Platform: ${identity.platformId} (role: ${identity.role})` : "Platform: none");
      expect(done.stdout).toContain(`Credential: ${credentialsPath(home)}`);
    });

    it("--json gives the identity response's fields with the address and source", async () => {
      const { home, person } = await loggedIn();
      const done = await runIn(home, ["whoami", "--json"]);
      const answer = JSON.parse(done.stdout);
      expect(answer).toMatchObject({ email: person.email, iamUrl: live.iamUrl, source: "file", credential: credentialsPath(home) });
      expect(Object.keys(answer).sort()).toEqual(["credential", "email", "expiresAt", "iamUrl", "platformId", "role", "source"]);
    });

    it("reads the credential file without changing it", async () => {
      const { home } = await loggedIn();
      const before = readFileSync(credentialsPath(home));
      const mtime = statSync(credentialsPath(home)).mtimeMs;
      expect((await runIn(home, ["whoami"])).code).toBe(0);
      expect(readFileSync(credentialsPath(home))).toEqual(before);
      expect(statSync(credentialsPath(home)).mtimeMs).toBe(mtime);
    });

    it("says plainly when the stored token has expired, exit 1, and does not refresh it", async () => {
      const { home, person } = await loggedIn();
      const expiredAt = HOUR_AGO();
      store(home, { ...stored(home), expiresAt: expiredAt });
      const before = readFileSync(credentialsPath(home));
      const done = await runIn(home, ["whoami"]);
      expect(done.code).toBe(1);
      expect(done.stderr.trim()).toBe(`Your login as ${person.email} expired at ${expiredAt}. Run: core login (or core token, which refreshes it)`);
      expect(readFileSync(credentialsPath(home))).toEqual(before);
    });

    it("says so when IAM no longer accepts the stored token (revoked), exit 1", async () => {
      const { home } = await loggedIn();
      await call(live.iam, "POST", "/oauth/revoke", {
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ token: stored(home).token, client_id: "core-cli" }).toString(),
      });
      const done = await runIn(home, ["whoami"]);
      expect(done.code).toBe(1);
      expect(done.stderr).toContain(`IAM at ${live.iamUrl} no longer accepts the stored token (UNAUTHENTICATED`);
      expect(done.stderr).toContain("Run: core login");
    });

    it("CORE_TOKEN wins over the stored file", async () => {
      const { home } = await loggedIn();
      const bob = await signUp(live.iam);
      const done = await runIn(home, ["whoami"], { CORE_TOKEN: bob.token, CORE_IAM_URL: live.iamUrl });
      expect(done.code).toBe(0);
      expect(done.stdout).toContain(`as ${bob.email}`);
      expect(done.stdout).toContain("Credential: CORE_TOKEN");
    });

    it("an operator's API key in CORE_TOKEN: the role in an organization without a platform, and a key that never expires", async () => {
      const op = await operator(live.iam);
      const { key } = await createApiKey(live.iam, op);
      const done = await runIn(freshHome(), ["whoami"], { CORE_TOKEN: key, CORE_IAM_URL: live.iamUrl });
      expect(done.code).toBe(0);
      expect(done.stdout).toBe(
        [
          `Logged in to ${live.iamUrl} as ${op.email}`,
          "Platform: none (role: owner, in an organization without a platform; core org list shows your others)",
          "Token expires: never (an API key without expiry)",
          "Credential: CORE_TOKEN",
          "",
        ].join("\n"),
      );
    });

    it("CORE_TOKEN=garbage: says it is not a valid token, not that it expired", async () => {
      const done = await runIn(freshHome(), ["whoami"], { CORE_TOKEN: "garbage", CORE_IAM_URL: live.iamUrl });
      expect(done.code).toBe(1);
      expect(done.stderr.trim()).toBe(
        "The token in CORE_TOKEN is not a valid token: IAM issues 32 letters and digits for a login, core_ and 64 letters for an API key. Check what was pasted, or run: core login",
      );
      expect(done.stderr).not.toContain("expired");
      const json = await runIn(freshHome(), ["whoami", "--json"], { CORE_TOKEN: "garbage", CORE_IAM_URL: live.iamUrl });
      expect(JSON.parse(json.stdout).error.code).toBe("TOKEN_MALFORMED");
    });

    it("a well-formed CORE_TOKEN IAM does not know: not valid here, with IAM's own answer", async () => {
      const done = await runIn(freshHome(), ["whoami"], { CORE_TOKEN: "A".repeat(32), CORE_IAM_URL: live.iamUrl });
      expect(done.code).toBe(1);
      expect(done.stderr).toContain(`IAM at ${live.iamUrl} says the token in CORE_TOKEN is not valid (UNAUTHENTICATED`);
      expect(done.stderr).toContain("it may have expired or been revoked, or come from another IAM. Run: core login");
    });

    it("someone in no organization: pointed to onboarding, and --json says null, not an empty string", async () => {
      const bob = await signUp(live.iam);
      const env = { CORE_TOKEN: bob.token, CORE_IAM_URL: live.iamUrl };
      const text = await runIn(freshHome(), ["whoami"], env);
      expect(text.stdout).toContain(`Platform: none (no organization yet: set one up at ${live.iamUrl}/onboarding, or accept an invitation)`);
      const json = JSON.parse((await runIn(freshHome(), ["whoami", "--json"], env)).stdout);
      expect(json).toMatchObject({ email: bob.email, platformId: null, role: null });
      expect(Object.values(json)).not.toContain("");
    });

    it("CORE_TOKEN goes to --iam-url before CORE_IAM_URL", async () => {
      const bob = await signUp(live.iam);
      const closed = `http://127.0.0.1:${await freePort()}`;
      const done = await runIn(freshHome(), ["whoami", "--iam-url", live.iamUrl], { CORE_TOKEN: bob.token, CORE_IAM_URL: closed });
      expect(done.code).toBe(0);
      expect(done.stdout).toContain(`Logged in to ${live.iamUrl} as ${bob.email}`);
    });

    it("never sends a stored login's token to another address: --iam-url is for CORE_TOKEN", async () => {
      const { home, person } = await loggedIn();
      const elsewhere = `http://127.0.0.1:${await freePort()}`;
      const done = await runIn(home, ["whoami", "--iam-url", elsewhere], { CORE_IAM_URL: elsewhere });
      expect(done.code).toBe(0);
      expect(done.stdout).toContain(`Logged in to ${live.iamUrl} as ${person.email}`);
      expect(done.stderr).toContain(`the stored login asks ${live.iamUrl}`);
    });

    it("not logged in: says so and how to log in, exit 1", async () => {
      const home = freshHome();
      const done = await runIn(home, ["whoami"]);
      expect(done).toMatchObject({ code: 1, stdout: "" });
      expect(done.stderr.trim()).toBe(`Not logged in (no CORE_TOKEN and no ${credentialsPath(home)}). Run: core login`);
    });

    it("IAM unreachable: a clear message naming the address, no stack trace, exit 1", async () => {
      const { home } = await loggedIn();
      const closed = `http://127.0.0.1:${await freePort()}`;
      store(home, { ...stored(home), iamUrl: closed });
      const done = await runIn(home, ["whoami"]);
      expect(done.code).toBe(1);
      expect(done.stderr.trim()).toBe(`Cannot reach IAM at ${closed} (connection refused). Check the network, or whether IAM runs there.`);
    });

    it("a damaged credential file is a clear message, never a stack trace", async () => {
      const home = freshHome();
      mkdirSync(home, { recursive: true });
      writeFileSync(credentialsPath(home), "{ not json");
      for (const command of ["whoami", "status", "token"]) {
        const done = await runIn(home, [command]);
        expect(done.code).toBe(1);
        expect(done.stderr).toContain(`The credential file ${credentialsPath(home)} cannot be read (not JSON)`);
        expect(done.stderr).not.toMatch(STACK_FRAME);
      }
    });
  });

  describe("core status", () => {
    it("names the stored login in use and where it is kept, without asking IAM", async () => {
      const { home, person } = await loggedIn();
      const record = stored(home);
      store(home, { ...record, iamUrl: `http://127.0.0.1:${await freePort()}` });
      const done = await runIn(home, ["status"]);
      expect(done.code).toBe(0);
      expect(done.stdout).toContain(`Using the stored login in ${credentialsPath(home)}`);
      expect(done.stdout).toContain(`account:  ${person.email}`);
      expect(done.stdout).toContain(`expires:  ${record.expiresAt} (valid)`);
      expect(done.stdout).toContain("device login (refreshable)");
    });

    it("shows an expired login as expired, with the way out", async () => {
      const { home } = await loggedIn();
      store(home, { ...stored(home), expiresAt: HOUR_AGO() });
      expect((await runIn(home, ["status"])).stdout).toContain("(expired; core token refreshes it)");
    });

    it("names CORE_TOKEN when it is set, and the stored login it overrides", async () => {
      const { home, person } = await loggedIn();
      const done = await runIn(home, ["status"], { CORE_TOKEN: "ci-token" });
      expect(done.code).toBe(0);
      expect(done.stdout).toContain("Using the token in CORE_TOKEN, for IAM at http://localhost:4100.");
      expect(done.stdout).toContain(`The stored login in ${credentialsPath(home)} (${person.email}) is ignored while CORE_TOKEN is set.`);
    });

    it("--json describes the credential but never prints the tokens", async () => {
      const { home, person } = await loggedIn();
      const done = await runIn(home, ["status", "--json"]);
      const answer = JSON.parse(done.stdout);
      expect(answer).toMatchObject({ source: "file", credentialsPath: credentialsPath(home), email: person.email, iamUrl: live.iamUrl, audience: "core-cli", expired: false, refreshable: true });
      expect(done.stdout).not.toContain(stored(home).token);
      expect(done.stdout).not.toContain(stored(home).refreshToken);
    });

    it("not logged in: exit 1", async () => {
      const done = await runIn(freshHome(), ["status"]);
      expect(done.code).toBe(1);
      expect(done.stderr).toMatch(/^Not logged in/);
    });
  });

  describe("core token", () => {
    it("prints the stored access token, and nothing else, while it is valid", async () => {
      const { home } = await loggedIn();
      const done = await runIn(home, ["token"]);
      expect(done).toMatchObject({ code: 0, stdout: `${stored(home).token}\n`, stderr: "" });
    });

    it("refreshes an expired token with the refresh token, stores the rotated pair and prints the new token", async () => {
      const { home, person } = await loggedIn();
      const old = stored(home);
      store(home, { ...old, expiresAt: HOUR_AGO() });
      const done = await runIn(home, ["token"]);
      expect(done.code).toBe(0);
      const now = stored(home);
      expect(done.stdout).toBe(`${now.token}\n`);
      expect(now.token).not.toBe(old.token);
      expect(now.refreshToken).not.toBe(old.refreshToken);
      expect(Date.parse(now.expiresAt)).toBeGreaterThan(Date.now() + 3_500_000);
      expect(now).toMatchObject({ email: old.email, iamUrl: old.iamUrl, audience: "core-cli" });
      expect((await whoamiOf(live.iam, now.token)).body.email).toBe(person.email);
      expect(statSync(credentialsPath(home)).mode & 0o777).toBe(0o600);
      // and the next call uses the new token as it is
      expect((await runIn(home, ["token"])).stdout).toBe(`${now.token}\n`);
    });

    it("two core token at once refresh once: both print the same token and the login survives", async () => {
      const { home } = await loggedIn();
      store(home, { ...stored(home), expiresAt: HOUR_AGO() });
      const [a, b] = await Promise.all([runIn(home, ["token"]), runIn(home, ["token"])]);
      expect([a.code, b.code]).toEqual([0, 0]);
      expect(a.stdout).toBe(b.stdout);
      // a second use of the spent refresh token would have revoked the whole login (RFC 9700 §4.14)
      expect((await whoamiOf(live.iam, a.stdout.trim())).status).toBe(200);
      expect((await refresh(live.iam, stored(home).refreshToken)).status).toBe(200);
    });

    it("a refresh IAM refuses (the login was revoked): says so, exit 1", async () => {
      const { home } = await loggedIn();
      const record = stored(home);
      await call(live.iam, "POST", "/oauth/revoke", { body: { token: record.refreshToken, client_id: "core-cli" } });
      store(home, { ...record, expiresAt: HOUR_AGO() });
      const done = await runIn(home, ["token"]);
      expect(done.code).toBe(1);
      expect(done.stderr.trim()).toBe(`IAM at ${live.iamUrl} refused to refresh your login (invalid_grant): it was revoked or has expired. Run: core login`);
    });

    it("an expired token from core login --token cannot be refreshed: says so, exit 1", async () => {
      const home = freshHome();
      const expiredAt = HOUR_AGO();
      store(home, { token: "t", refreshToken: null, email: "ci-user", platformId: null, role: "", expiresAt: expiredAt, iamUrl: live.iamUrl, audience: "core-cli" });
      const done = await runIn(home, ["token"]);
      expect(done.code).toBe(1);
      expect(done.stderr.trim()).toBe(`Your login as ci-user expired at ${expiredAt}. Run: core login`);
    });

    it("prints CORE_TOKEN when it is set", async () => {
      const { home } = await loggedIn();
      expect((await runIn(home, ["token"], { CORE_TOKEN: "from-the-environment" })).stdout).toBe("from-the-environment\n");
    });

    it("--json: the token with its expiry and source", async () => {
      const { home } = await loggedIn();
      const record = stored(home);
      expect(JSON.parse((await runIn(home, ["token", "--json"])).stdout)).toEqual({ token: record.token, expiresAt: record.expiresAt, source: "file", refreshed: false });
    });
  });

  describe("core logout", () => {
    it("revokes the session and the refresh token on the server, then deletes the file", async () => {
      const { home } = await loggedIn();
      const record = stored(home);
      const done = await runIn(home, ["logout"]);
      expect(done.code).toBe(0);
      expect(done.stdout.trim()).toBe(`Logged out: revoked the session at ${live.iamUrl} and deleted ${credentialsPath(home)}.`);
      expect(exists(credentialsPath(home))).toBe(false);
      expect((await whoamiOf(live.iam, record.token)).status).toBe(401);
      expect((await refresh(live.iam, record.refreshToken)).body.error).toBe("invalid_grant");
    });

    it("still deletes the file when IAM cannot be reached, and says the session was not revoked", async () => {
      const { home } = await loggedIn();
      const closed = `http://127.0.0.1:${await freePort()}`;
      const record = { ...stored(home), iamUrl: closed };
      store(home, record);
      const done = await runIn(home, ["logout"]);
      expect(done.code).toBe(0);
      expect(done.stderr.trim()).toBe(`Could not revoke the session at ${closed} (connection refused); it stays valid until ${record.expiresAt}.`);
      expect(done.stdout.trim()).toBe(`Logged out: deleted ${credentialsPath(home)}.`);
      expect(exists(credentialsPath(home))).toBe(false);
    });

    it("forgets a token given to core login --token without revoking it", async () => {
      const ada = await signUp(live.iam);
      const home = freshHome();
      await runIn(home, ["login", "--token", ada.token, "--iam-url", live.iamUrl]);
      const done = await runIn(home, ["logout"]);
      expect(done.code).toBe(0);
      expect(done.stdout).toContain("was not revoked");
      expect(exists(credentialsPath(home))).toBe(false);
      expect((await whoamiOf(live.iam, ada.token)).status).toBe(200);
    });

    it("--json reports what happened", async () => {
      const { home } = await loggedIn();
      expect(JSON.parse((await runIn(home, ["logout", "--json"])).stdout)).toEqual({ loggedOut: true, deleted: true, revoked: true, credentialsPath: credentialsPath(home) });
    });

    it("not logged in: says so, exit 0", async () => {
      const home = freshHome();
      const done = await runIn(home, ["logout"]);
      expect(done).toMatchObject({ code: 0, stdout: `Not logged in: there is no ${credentialsPath(home)}.\n` });
    });

    it("removes a damaged credential file", async () => {
      const home = freshHome();
      mkdirSync(home, { recursive: true });
      writeFileSync(credentialsPath(home), "{ not json");
      const done = await runIn(home, ["logout"]);
      expect(done.code).toBe(0);
      expect(exists(credentialsPath(home))).toBe(false);
    });
  });
});
