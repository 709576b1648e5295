import { chmodSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { readCredential, withCredentialLock, writeCredential, type Credential } from "../src/credentials.js";
import { CliFailure } from "../src/failures.js";
import { DEFAULT_IAM_URL, readSettings, resolveBillingUrl, resolveIamUrl, resolveStackRegistryUrl } from "../src/settings.js";
import { removeScratchDirs, scratchDir } from "./support/cli.js";

const credential: Credential = {
  token: "access",
  refreshToken: "refresh",
  email: "ada@example.com",
  platformId: null,
  role: "",
  expiresAt: "2030-01-01T00:00:00.000Z",
  iamUrl: "http://localhost:4100",
  audience: "core-cli",
};
const scratch = () => scratchDir("credentials");
afterAll(removeScratchDirs);
const modeOf = (path: string) => statSync(path).mode & 0o777;
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

describe("the credential file (spec §2.1, §4.8, §8)", () => {
  it("creates the directory with mode 0700 and the file with mode 0600", async () => {
    const home = join(scratch(), "nested", ".core");
    await writeCredential(join(home, "credentials.json"), credential);
    expect(modeOf(home)).toBe(0o700);
    expect(modeOf(join(home, "credentials.json"))).toBe(0o600);
    expect(JSON.parse(readFileSync(join(home, "credentials.json"), "utf8"))).toEqual(credential);
  });

  it("replaces the file by renaming a new one over it: a new inode, mode 0600 even when the old file was wider", async () => {
    const home = scratch();
    const path = join(home, "credentials.json");
    writeFileSync(path, JSON.stringify({ ...credential, token: "old" }));
    chmodSync(path, 0o644);
    const before = statSync(path).ino;
    await writeCredential(path, credential);
    expect(statSync(path).ino).not.toBe(before);
    expect(modeOf(path)).toBe(0o600);
    expect(readdirSync(home)).toEqual(["credentials.json"]);
  });

  it("a place it cannot write is a clear failure that names the file and CORE_HOME", async () => {
    const blocker = join(scratch(), "a-file");
    writeFileSync(blocker, "");
    const path = join(blocker, ".core", "credentials.json");
    const err = await writeCredential(path, credential).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CliFailure);
    expect((err as Error).message).toMatch(new RegExp(`^Cannot write ${path} \\(ENOTDIR: .*\\)\\. Set CORE_HOME to a directory you can write\\.$`));
  });

  it("reads back what it wrote; no file is no credential", async () => {
    const path = join(scratch(), "credentials.json");
    expect(await readCredential(path)).toBeNull();
    await writeCredential(path, credential);
    expect(await readCredential(path)).toEqual(credential);
  });

  it.each([
    ["not JSON", "{", "not JSON"],
    ["a record without a token", JSON.stringify({ ...credential, token: undefined }), "no token"],
    ["an expiry that is not a date", JSON.stringify({ ...credential, expiresAt: "soon" }), "expiresAt is not a date"],
  ])("refuses %s with a clear message", async (_, content, reason) => {
    const path = join(scratch(), "credentials.json");
    writeFileSync(path, content);
    const err = await readCredential(path).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CliFailure);
    expect((err as Error).message).toContain(`(${reason})`);
  });

  it("the refresh lock lets one process at a time through", async () => {
    const path = join(scratch(), "credentials.json");
    const order: string[] = [];
    const work = (name: string) => async () => {
      order.push(`${name} in`);
      await sleep(30);
      order.push(`${name} out`);
    };
    await Promise.all([withCredentialLock(path, work("a"), sleep), withCredentialLock(path, work("b"), sleep)]);
    // either may win the race for the lock; what matters is that they never overlap
    const [first, second] = order[0] === "a in" ? ["a", "b"] : ["b", "a"];
    expect(order).toEqual([`${first} in`, `${first} out`, `${second} in`, `${second} out`]);
    expect(readdirSync(join(path, ".."))).toEqual([]);
  });
});

describe("settings", () => {
  it("CORE_HOME moves ~/.core", () => {
    expect(readSettings({ CORE_HOME: "/srv/ci/.core" }).credentialsPath).toBe("/srv/ci/.core/credentials.json");
    expect(readSettings({}).credentialsPath).toBe(join(homedir(), ".core", "credentials.json"));
  });

  it("the IAM address: the flag, then CORE_IAM_URL, then http://localhost:4100 (spec §4.8)", () => {
    const withEnv = readSettings({ CORE_IAM_URL: "https://iam.example.com/" });
    expect(resolveIamUrl("http://flag.example:4100", withEnv)).toBe("http://flag.example:4100");
    expect(resolveIamUrl(undefined, withEnv)).toBe("https://iam.example.com");
    expect(resolveIamUrl(undefined, readSettings({}))).toBe(DEFAULT_IAM_URL);
    expect(DEFAULT_IAM_URL).toBe("http://localhost:4100");
  });

  it("follows CORE_BASE_PORT for the addresses nothing names, as the services do; a named one wins", () => {
    const moved = readSettings({ CORE_BASE_PORT: "5100" });
    expect(resolveIamUrl(undefined, moved)).toBe("http://localhost:5100");
    expect(resolveBillingUrl(undefined, moved)).toBe("http://localhost:5200");
    expect(resolveStackRegistryUrl(undefined, moved)).toBe("http://localhost:5300");
    expect(resolveStackRegistryUrl(undefined, readSettings({ CORE_BASE_PORT: "5100", CORE_STACK_REGISTRY_URL: "http://registry.example" }))).toBe("http://registry.example");
    expect(resolveBillingUrl(undefined, readSettings({}))).toBe("http://localhost:4200");
    for (const raw of ["0", "x", "65200", "41.5"]) expect(() => readSettings({ CORE_BASE_PORT: raw })).toThrow(`CORE_BASE_PORT must be a port number, got "${raw}".`);
  });

  it("keeps a path prefix of the IAM address", () => {
    expect(resolveIamUrl("https://example.com/iam/", readSettings({}))).toBe("https://example.com/iam");
  });

  it("the login time limit is 5 minutes unless CORE_LOGIN_TIMEOUT_SECONDS says otherwise", () => {
    expect(readSettings({}).loginTimeoutMs).toBe(300_000);
    expect(readSettings({ CORE_LOGIN_TIMEOUT_SECONDS: "2.5" }).loginTimeoutMs).toBe(2_500);
    expect(() => readSettings({ CORE_LOGIN_TIMEOUT_SECONDS: "0" })).toThrow('CORE_LOGIN_TIMEOUT_SECONDS must be a positive number of seconds, got "0".');
  });

  it("a blank CORE_TOKEN is no token", () => {
    expect(readSettings({ CORE_TOKEN: "  " }).envToken).toBeUndefined();
  });
});
