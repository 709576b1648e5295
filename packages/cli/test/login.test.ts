import { readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createApiKey, freePort, signUp } from "../../../services/iam/test/support/harness.js";
import { buildCli, CoreProcess, freshHome, removeScratchDirs, runCli, scratchDir, STACK_FRAME } from "./support/cli.js";
import { approve, deny, startLiveIam, userWithPlatform, whoamiOf, type LiveIam } from "./support/live-iam.js";

const DAY_MS = 86_400_000;

/**
 * `core login` as a real process against a live IAM: every row of spec §7.3 and §7.4. IAM polls
 * every second here (deviceIntervalSeconds), so the rows run in seconds.
 */
describe("core login", () => {
  let core: string;
  let live: LiveIam;
  beforeAll(async () => {
    [core, live] = await Promise.all([buildCli(), startLiveIam({ deviceIntervalSeconds: 1 })]);
  });
  afterAll(async () => {
    await live?.close();
    removeScratchDirs();
  });

  /** Starts `core login` and reads the user code it prints. */
  async function startLogin(home: string, env: Record<string, string> = {}) {
    const cli = new CoreProcess(core, ["login", "--iam-url", live.iamUrl], { env: { CORE_HOME: home, CORE_DEBUG: "1", ...env } });
    const [, userCode] = await cli.waitFor(/Your one-time code: ([A-Z]{4}-[A-Z]{4})/);
    return { cli, userCode: userCode! };
  }
  const credentialsOf = (home: string) => JSON.parse(readFileSync(join(home, "credentials.json"), "utf8"));
  const exists = (path: string) => statSync(path, { throwIfNoEntry: false }) !== undefined;

  describe("device login (spec §4.8, §7.3)", () => {
    it("prints the code and the verification URL with the code filled in", async () => {
      const ada = await signUp(live.iam);
      const { cli, userCode } = await startLogin(freshHome());
      expect(cli.stdout).toContain(`${live.iamUrl}/device?user_code=${userCode}`);
      expect(cli.stdout).toContain(`${live.iamUrl}/device and enter the code`);
      await approve(live.iam, ada, userCode);
      expect((await cli.finished).code).toBe(0);
    });

    it("keeps polling while authorization_pending, then prints `Authenticated as <email>` and exits 0", async () => {
      const ada = await userWithPlatform(live.iam);
      const { cli, userCode } = await startLogin(freshHome());
      await cli.waitFor(/→ 400 authorization_pending[\s\S]*→ 400 authorization_pending/);
      await approve(live.iam, ada, userCode);
      const done = await cli.finished;
      expect(done.code).toBe(0);
      expect(done.stdout.trim().split("\n").at(-1)).toBe(`Authenticated as ${ada.email}`);
      expect(done.stderr).not.toMatch(/slow_down/);
    });

    it("writes the credential record of spec §2.1 from IAM's identity, audience core-cli", async () => {
      const ada = await userWithPlatform(live.iam);
      const home = freshHome();
      const { cli, userCode } = await startLogin(home);
      await approve(live.iam, ada, userCode);
      expect((await cli.finished).code).toBe(0);
      const stored = credentialsOf(home);
      expect(Object.keys(stored).sort()).toEqual(["audience", "email", "expiresAt", "iamUrl", "platformId", "refreshToken", "role", "token"]);
      const identity = (await whoamiOf(live.iam, stored.token)).body;
      expect(stored).toMatchObject({ email: ada.email, role: identity.role, iamUrl: live.iamUrl, audience: "core-cli" });
      expect(stored.platformId).toBe(identity.platformId || null);
      expect(stored.refreshToken).toEqual(expect.any(String));
      expect(Date.parse(stored.expiresAt)).toBe(Date.parse(identity.expiresAt));
      expect(stored.expiresAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    });

    it("creates ~/.core with mode 0700 and the file with mode 0600, leaving no temporary file", async () => {
      const ada = await signUp(live.iam);
      const home = freshHome();
      const { cli, userCode } = await startLogin(home);
      await approve(live.iam, ada, userCode);
      await cli.finished;
      expect(statSync(home).mode & 0o777).toBe(0o700);
      expect(statSync(join(home, "credentials.json")).mode & 0o777).toBe(0o600);
      const { readdirSync } = await import("node:fs");
      expect(readdirSync(home)).toEqual(["credentials.json"]);
    });

    it("access_denied: prints `Access denied.`, exits 1 and stores nothing (spec §7.4)", async () => {
      const ada = await signUp(live.iam);
      const home = freshHome();
      const { cli, userCode } = await startLogin(home);
      await deny(live.iam, ada, userCode);
      const done = await cli.finished;
      expect(done.code).toBe(1);
      expect(done.stderr.trim().split("\n").at(-1)).toBe("Access denied.");
      expect(exists(join(home, "credentials.json"))).toBe(false);
    });

    it("slow_down: adds 5 seconds to the interval, for good, and still logs in (spec §7.3, §8)", async () => {
      const ada = await signUp(live.iam);
      const { cli, userCode } = await startLogin(freshHome());
      // IAM's time stands still: its second poll arrives "0 s" after the first, too fast
      live.freezeClock();
      try {
        await cli.waitFor(/polling every 6 s/, 10_000);
      } finally {
        live.resumeClock();
      }
      const slowedAt = cli.stderrLines.find((l) => l.line.includes("slow_down"))!.at;
      await approve(live.iam, ada, userCode);
      const done = await cli.finished;
      expect(done.code).toBe(0);
      expect(done.stdout).toContain(`Authenticated as ${ada.email}`);
      // the next poll came 1 + 5 s later: IAM (which also added 5 s) found it in time
      const nextPoll = cli.stderrLines.find((l) => l.at > slowedAt && l.line.includes("/oauth/device/token →"))!;
      expect(nextPoll.line).toMatch(/→ 200$/);
      expect(nextPoll.at - slowedAt).toBeGreaterThanOrEqual(5_900);
      expect(done.stderr.match(/→ 400 slow_down/g)).toHaveLength(1);
    }, 30_000);

    it("expired_token: prints `Code expired. Run: core login` and exits 1 (spec §7.3, §7.4)", async () => {
      const shortLived = await startLiveIam({ deviceIntervalSeconds: 1, deviceCodeSeconds: 2 });
      try {
        const cli = new CoreProcess(core, ["login", "--iam-url", shortLived.iamUrl], { env: { CORE_HOME: freshHome() } });
        const done = await cli.finished;
        expect(done.code).toBe(1);
        expect(done.stderr.trim()).toBe("Code expired. Run: core login");
      } finally {
        await shortLived.close();
      }
    });

    it("stops polling at the limit: `Login timed out. Run: core login`, exit 1 (spec §7.4, §8)", async () => {
      const started = Date.now();
      const { cli } = await startLogin(freshHome(), { CORE_LOGIN_TIMEOUT_SECONDS: "2.5" });
      const done = await cli.finished;
      const elapsed = Date.now() - started;
      expect(done.code).toBe(1);
      expect(done.stderr.trim().split("\n").at(-1)).toBe("Login timed out. Run: core login");
      expect(elapsed).toBeGreaterThanOrEqual(2_500);
      expect(elapsed).toBeLessThan(5_000);
    });

    it("an approval at the limit's last poll still logs in", async () => {
      const ada = await signUp(live.iam);
      // polls at about 1 s and 2 s, the last one at the 2.9 s limit
      const { cli, userCode } = await startLogin(freshHome(), { CORE_LOGIN_TIMEOUT_SECONDS: "2.9" });
      await cli.waitFor(/→ 400 authorization_pending[\s\S]*→ 400 authorization_pending/);
      await approve(live.iam, ada, userCode);
      expect((await cli.finished).code).toBe(0);
      expect(cli.stderr.match(/\/oauth\/device\/token →/g)).toHaveLength(3);
    });

    it("IAM unreachable: `Interactive login is unavailable`, naming the address and the --token remedy (spec §7.4)", async () => {
      const closed = `http://127.0.0.1:${await freePort()}`;
      const done = await runCli(core, ["login", "--iam-url", closed], { env: { CORE_HOME: freshHome() } });
      expect(done.code).toBe(1);
      expect(done.stderr).toMatch(/^Interactive login is unavailable/);
      expect(done.stderr).toContain(closed);
      expect(done.stderr).toContain("core login --token");
      expect(done.stderr).not.toMatch(STACK_FRAME);
    });

    it("device endpoint answering a non-2xx status: `Device login endpoint not available (<status>)` and the --token remedy (spec §7.4)", async () => {
      // a real IAM, addressed under a path where it has no device route
      const base = `${live.iamUrl}/no-such-prefix`;
      const direct = await fetch(`${base}/oauth/device/code`, { method: "POST", body: new URLSearchParams({ client_id: "core-cli" }) });
      await direct.body?.cancel();
      expect(direct.ok).toBe(false);
      const done = await runCli(core, ["login", "--iam-url", base], { env: { CORE_HOME: freshHome() } });
      expect(done.code).toBe(1);
      expect(done.stderr).toMatch(new RegExp(`^Device login endpoint not available \\(${direct.status}\\)`));
      expect(done.stderr).toContain("core login --token");
    });

    it("device endpoint answering 429 (IAM's rate limit): `Device login endpoint not available (429)`", async () => {
      // IAM's windows are fixed (aligned to the clock): a day-long one cannot roll over between the
      // last refused request and the CLI's, which would hand the CLI a code to poll until the timeout
      const limited = await startLiveIam({ rateLimits: { enabled: true, windowSeconds: 86_400 } });
      try {
        let status = 200;
        for (let i = 0; i < 100 && status !== 429; i++) {
          const r = await fetch(`${limited.iamUrl}/oauth/device/code`, { method: "POST", body: new URLSearchParams({ client_id: "core-cli" }) });
          status = r.status;
          await r.body?.cancel();
        }
        expect(status).toBe(429);
        const done = await runCli(core, ["login", "--iam-url", limited.iamUrl], { env: { CORE_HOME: freshHome() } });
        expect(done.code).toBe(1);
        expect(done.stderr).toMatch(/^Device login endpoint not available \(429\)/);
      } finally {
        await limited.close();
      }
    });

    it("--json: one JSON document on stdout; the code and address go to stderr", async () => {
      const ada = await signUp(live.iam);
      const home = freshHome();
      const cli = new CoreProcess(core, ["login", "--json", "--iam-url", live.iamUrl], { env: { CORE_HOME: home } });
      const [, userCode] = await cli.waitFor(/Your one-time code: ([A-Z]{4}-[A-Z]{4})/);
      expect(cli.stdout).toBe("");
      await approve(live.iam, ada, userCode!);
      const done = await cli.finished;
      expect(JSON.parse(done.stdout)).toMatchObject({ authenticated: true, method: "device", email: ada.email, iamUrl: live.iamUrl, credentialsPath: join(home, "credentials.json") });
    });

    it("--json failures: { error: { code, message } } on stdout, exit 1", async () => {
      const ada = await signUp(live.iam);
      const cli = new CoreProcess(core, ["login", "--json", "--iam-url", live.iamUrl], { env: { CORE_HOME: freshHome() } });
      const [, userCode] = await cli.waitFor(/Your one-time code: ([A-Z]{4}-[A-Z]{4})/);
      await deny(live.iam, ada, userCode!);
      const done = await cli.finished;
      expect(done.code).toBe(1);
      expect(JSON.parse(done.stdout)).toEqual({ error: { code: "ACCESS_DENIED", message: "Access denied." } });
    });
  });

  describe("offering to open the browser", () => {
    /** A stand-in browser: a script that writes the arguments it was given to a file. */
    const fakeBrowser = () => {
      const dir = scratchDir("browser");
      const opened = join(dir, "opened.txt");
      const script = join(dir, "browser.sh");
      writeFileSync(script, `#!/bin/sh\nprintf '%s\\n' "$@" > '${opened}'\n`, { mode: 0o755 });
      return { script, opened: () => (exists(opened) ? readFileSync(opened, "utf8").trim().split("\n") : null) };
    };
    const atTerminal = (args: string[], env: Record<string, string>) =>
      new CoreProcess(core, ["login", "--iam-url", live.iamUrl, ...args], { env: { CORE_HOME: freshHome(), ...env }, terminal: true });
    const codeOf = async (cli: CoreProcess) => (await cli.waitFor(/Your one-time code: ([A-Z]{4}-[A-Z]{4})/))[1]!;

    it("at a terminal, Enter opens the address with the code filled in, and the login goes on", async () => {
      const ada = await signUp(live.iam);
      const browser = fakeBrowser();
      const cli = atTerminal([], { BROWSER: browser.script });
      const userCode = await codeOf(cli);
      await cli.waitFor(/Press Enter to open it in your browser\.\r?\nWaiting for approval/);
      cli.type("\n");
      await cli.waitFor(/Opened the address in your browser\./);
      await vi.waitFor(() => expect(browser.opened()).toEqual([`${live.iamUrl}/device?user_code=${userCode}`]));
      await approve(live.iam, ada, userCode);
      const done = await cli.finished;
      expect(done.code).toBe(0);
      expect(done.stdout).toContain(`Authenticated as ${ada.email}`);
    });

    it("an approval from elsewhere ends the login without Enter: the terminal is let go and nothing is opened", async () => {
      const ada = await signUp(live.iam);
      const browser = fakeBrowser();
      const cli = atTerminal([], { BROWSER: `${browser.script} --new-window %s` });
      const userCode = await codeOf(cli);
      await cli.waitFor(/Press Enter/);
      await approve(live.iam, ada, userCode);
      const done = await cli.finished;
      expect(done.code).toBe(0);
      expect(browser.opened()).toBeNull();
    });

    it("BROWSER with %s: the address takes its place among the arguments", async () => {
      const ada = await signUp(live.iam);
      const browser = fakeBrowser();
      const cli = atTerminal([], { BROWSER: `${browser.script} --new-window %s --private` });
      const userCode = await codeOf(cli);
      await cli.waitFor(/Press Enter/);
      cli.type("\n");
      await vi.waitFor(() => expect(browser.opened()).toEqual(["--new-window", `${live.iamUrl}/device?user_code=${userCode}`, "--private"]));
      await approve(live.iam, ada, userCode);
      expect((await cli.finished).code).toBe(0);
    });

    it("a browser that cannot start is reported, and the login still works with the address shown", async () => {
      const ada = await signUp(live.iam);
      const missing = join(scratchDir("browser"), "no-such-browser");
      const cli = atTerminal([], { BROWSER: missing });
      const userCode = await codeOf(cli);
      await cli.waitFor(/Press Enter/);
      cli.type("\n");
      await cli.waitFor(new RegExp(`Could not open a browser \\(${missing}: ENOENT\\): open the address yourself\\.`));
      await approve(live.iam, ada, userCode);
      expect((await cli.finished).code).toBe(0);
    });

    for (const [why, args, env] of [
      ["--no-browser", ["--no-browser"], {}],
      ["CORE_NO_BROWSER=1", [], { CORE_NO_BROWSER: "1" }],
      ["CI=true (never in CI)", [], { CI: "true" }],
      ["no graphical session and no BROWSER (Linux)", [], { BROWSER: "" }],
    ] as const) {
      it(`no offer with ${why}, and Enter opens nothing`, async () => {
        const ada = await signUp(live.iam);
        const browser = fakeBrowser();
        const cli = atTerminal([...args], { BROWSER: browser.script, ...env });
        const userCode = await codeOf(cli);
        await cli.waitFor(/Waiting for approval/);
        cli.type("\n");
        await approve(live.iam, ada, userCode);
        const done = await cli.finished;
        expect(done.code).toBe(0);
        expect(done.stdout).not.toContain("Press Enter");
        expect(browser.opened()).toBeNull();
      });
    }

    it("no offer when standard input is not a terminal (a script, a pipe)", async () => {
      const ada = await signUp(live.iam);
      const browser = fakeBrowser();
      const { cli, userCode } = await startLogin(freshHome(), { BROWSER: browser.script });
      await approve(live.iam, ada, userCode);
      const done = await cli.finished;
      expect(done.code).toBe(0);
      expect(done.stdout).not.toContain("Press Enter");
      expect(done.stderr).toContain("not offering to open a browser: standard input is not a terminal");
      expect(browser.opened()).toBeNull();
    });
  });

  describe("token mode (spec §4.8)", () => {
    it("stores the token with the identity IAM looks up, and prints `Authenticated via token`", async () => {
      const ada = await userWithPlatform(live.iam);
      const home = freshHome();
      const done = await runCli(core, ["login", "--token", ada.token, "--iam-url", live.iamUrl], { env: { CORE_HOME: home } });
      expect(done).toMatchObject({ code: 0, stdout: "Authenticated via token\n" });
      const identity = (await whoamiOf(live.iam, ada.token)).body;
      expect(credentialsOf(home)).toEqual({
        token: ada.token,
        refreshToken: null,
        email: ada.email,
        platformId: identity.platformId || null,
        role: identity.role,
        expiresAt: new Date(identity.expiresAt).toISOString(),
        iamUrl: live.iamUrl,
        audience: "core-cli",
      });
      expect(statSync(join(home, "credentials.json")).mode & 0o777).toBe(0o600);
    });

    it("--token - reads the token from standard input, so it stays out of the shell history", async () => {
      const ada = await signUp(live.iam);
      const home = freshHome();
      const done = await runCli(core, ["login", "--token", "-", "--iam-url", live.iamUrl], { env: { CORE_HOME: home }, stdin: `${ada.token}\n` });
      expect(done).toMatchObject({ code: 0, stdout: "Authenticated via token\n" });
      expect(credentialsOf(home)).toMatchObject({ token: ada.token, email: ada.email });
    });

    it("stores `ci-user` as the email, expiring 30 days ahead, when IAM cannot be reached", async () => {
      const closed = `http://127.0.0.1:${await freePort()}`;
      const home = freshHome();
      const before = Date.now();
      const done = await runCli(core, ["login", "--token", "ci-secret-token", "--iam-url", closed], { env: { CORE_HOME: home } });
      expect(done.code).toBe(0);
      expect(done.stdout).toBe("Authenticated via token\n");
      expect(done.stderr).toContain(closed);
      const stored = credentialsOf(home);
      expect(stored).toMatchObject({ token: "ci-secret-token", refreshToken: null, email: "ci-user", platformId: null, role: "", iamUrl: closed, audience: "core-cli" });
      const expires = Date.parse(stored.expiresAt);
      expect(expires).toBeGreaterThanOrEqual(before + 30 * DAY_MS);
      expect(expires).toBeLessThanOrEqual(Date.now() + 30 * DAY_MS);
    });

    it("logs a CI job in with an API key: IAM names the key's owner, the key expires 30 days ahead in the file, and whoami works with it", async () => {
      const ada = await userWithPlatform(live.iam);
      const { key } = await createApiKey(live.iam, ada);
      expect(key.startsWith("core_")).toBe(true);
      const home = freshHome();
      const before = Date.now();
      const done = await runCli(core, ["login", "--token", "-", "--iam-url", live.iamUrl], { env: { CORE_HOME: home }, stdin: `${key}\n` });
      expect(done).toMatchObject({ code: 0, stdout: "Authenticated via token\n", stderr: "" });
      const stored = credentialsOf(home);
      expect(stored).toMatchObject({ token: key, refreshToken: null, email: ada.email, platformId: ada.platformId, role: "owner", audience: "core-cli" });
      expect(Date.parse(stored.expiresAt)).toBeGreaterThanOrEqual(before + 30 * DAY_MS);
      const whoami = await runCli(core, ["whoami", "--json"], { env: { CORE_HOME: home } });
      expect(whoami.code).toBe(0);
      expect(JSON.parse(whoami.stdout)).toMatchObject({ email: ada.email, platformId: ada.platformId });
      // the key never expires; the login ends when the file says, and whoami, status and the file agree
      expect(JSON.parse(whoami.stdout).expiresAt).toBe(stored.expiresAt);
      const text = await runCli(core, ["whoami"], { env: { CORE_HOME: home } });
      expect(text.stdout).toContain(`Token expires: ${stored.expiresAt} (this login; the API key itself never expires)`);
      const status = await runCli(core, ["status"], { env: { CORE_HOME: home } });
      expect(status.stdout).toContain(`  expires:  ${stored.expiresAt} (valid; an API key's own expiry: core whoami)`);
    });

    it("an API key with its own expiry: the file, whoami and status give the key's expiry", async () => {
      const ada = await userWithPlatform(live.iam);
      const { key } = await createApiKey(live.iam, ada, { name: "ci", expiresIn: 10 * 86_400 });
      const home = freshHome();
      expect((await runCli(core, ["login", "--token", key, "--iam-url", live.iamUrl], { env: { CORE_HOME: home } })).code).toBe(0);
      const stored = credentialsOf(home);
      expect(Date.parse(stored.expiresAt)).toBeLessThan(Date.now() + 11 * DAY_MS);
      expect(Date.parse(stored.expiresAt)).toBeGreaterThan(Date.now() + 9 * DAY_MS);
      expect(JSON.parse((await runCli(core, ["whoami", "--json"], { env: { CORE_HOME: home } })).stdout).expiresAt).toBe(stored.expiresAt);
      expect((await runCli(core, ["whoami"], { env: { CORE_HOME: home } })).stdout).toContain(`Token expires: ${stored.expiresAt}\n`);
      expect((await runCli(core, ["status"], { env: { CORE_HOME: home } })).stdout).toContain(`  expires:  ${stored.expiresAt} (valid`);
    });

    it("refuses an API key IAM does not know, exit 1, and stores nothing", async () => {
      const home = freshHome();
      const done = await runCli(core, ["login", "--token", "core_not-a-key", "--iam-url", live.iamUrl], { env: { CORE_HOME: home } });
      expect(done.code).toBe(1);
      expect(done.stderr).toContain("does not accept this token (UNAUTHENTICATED: This API key is invalid, expired or revoked)");
      expect(done.stderr).not.toContain("core_not-a-key");
      expect(exists(join(home, "credentials.json"))).toBe(false);
    });

    it("refuses a token IAM rejects (401), exit 1, and stores nothing", async () => {
      const home = freshHome();
      const done = await runCli(core, ["login", "--token", "not-a-session", "--iam-url", live.iamUrl], { env: { CORE_HOME: home } });
      expect(done.code).toBe(1);
      expect(done.stderr).toContain("does not accept this token (UNAUTHENTICATED");
      expect(exists(join(home, "credentials.json"))).toBe(false);
    });

    it("refuses an empty token", async () => {
      const done = await runCli(core, ["login", "--token", "-", "--iam-url", live.iamUrl], { env: { CORE_HOME: freshHome() }, stdin: "\n" });
      expect(done.code).toBe(1);
      expect(done.stderr).toMatch(/^No token given/);
    });
  });

  describe("IAM address (spec §4.8: flag, then CORE_IAM_URL, then the default)", () => {
    it("the flag wins over CORE_IAM_URL", async () => {
      const ada = await signUp(live.iam);
      const closed = `http://127.0.0.1:${await freePort()}`;
      const home = freshHome();
      const done = await runCli(core, ["login", "--token", ada.token, "--iam-url", live.iamUrl], { env: { CORE_HOME: home, CORE_IAM_URL: closed } });
      expect(done.code).toBe(0);
      expect(credentialsOf(home)).toMatchObject({ email: ada.email, iamUrl: live.iamUrl });
    });

    it("CORE_IAM_URL is used without the flag", async () => {
      const ada = await signUp(live.iam);
      const home = freshHome();
      const done = await runCli(core, ["login", "--token", ada.token], { env: { CORE_HOME: home, CORE_IAM_URL: `${live.iamUrl}/` } });
      expect(done.code).toBe(0);
      expect(credentialsOf(home)).toMatchObject({ email: ada.email, iamUrl: live.iamUrl });
    });

    it("an address that is not http(s) is a usage failure", async () => {
      const done = await runCli(core, ["login", "--iam-url", "localhost:4100"], { env: { CORE_HOME: freshHome() } });
      expect(done.code).toBe(1);
      expect(done.stderr).toContain('Invalid IAM address "localhost:4100" (from --iam-url)');
    });
  });
});
