import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ConfigError, loadCommonConfig } from "@core/kit";
import { loadIamConfig } from "../src/config.js";

const dataDir = mkdtempSync(join(tmpdir(), "core-iam-config-"));
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));
const load = (env: NodeJS.ProcessEnv) => loadIamConfig(loadCommonConfig({ CORE_DATA_DIR: dataDir, ...env }), { CORE_DATA_DIR: dataDir, ...env });

describe("IAM configuration", () => {
  const ours = "o".repeat(32);
  const library = "l".repeat(32);

  it("takes CORE_AUTH_SECRET over BETTER_AUTH_SECRET when both are set", () => {
    expect(load({ CORE_AUTH_SECRET: ours, BETTER_AUTH_SECRET: library }).authSecret).toBe(ours);
    expect(load({ BETTER_AUTH_SECRET: library }).authSecret).toBe(library);
  });

  it("generates the secret once into the data dir when none is set, and keeps it", () => {
    const first = load({}).authSecret;
    expect(first.length).toBeGreaterThanOrEqual(32);
    expect(load({}).authSecret).toBe(first);
    expect(readFileSync(join(dataDir, "auth.secret"), "utf8").trim()).toBe(first);
  });

  it("refuses a secret shorter than 32 characters, naming the variable but not the value", () => {
    const short = "s".repeat(31);
    expect(() => load({ CORE_AUTH_SECRET: short })).toThrow(ConfigError);
    expect(() => load({ CORE_AUTH_SECRET: short })).toThrow("CORE_AUTH_SECRET must be at least 32 characters");
    expect(() => load({ CORE_AUTH_SECRET: short })).not.toThrow(short);
  });

  it("resolves client metadata documents unless CORE_OAUTH_CLIENT_METADATA=off, and never lets the environment open private addresses", () => {
    expect(load({}).clientMetadata).toEqual({ enabled: true, timeoutMs: 5000, allowPrivate: false });
    expect(load({ CORE_OAUTH_CLIENT_METADATA: "off" }).clientMetadata.enabled).toBe(false);
    expect(load({ CORE_OAUTH_CLIENT_METADATA: "on" }).clientMetadata.enabled).toBe(true);
    expect(() => load({ CORE_OAUTH_CLIENT_METADATA: "yes" })).toThrow('CORE_OAUTH_CLIENT_METADATA must be on or off, got "yes"');
  });

  it("refuses a lifetime that is not a positive integer", () => {
    expect(() => load({ CORE_SESSION_SECONDS: "0" })).toThrow('CORE_SESSION_SECONDS must be a positive integer, got "0"');
    expect(() => load({ CORE_SESSION_SECONDS: "1.5" })).toThrow(ConfigError);
  });

  it("refuses a CORE_TRUST_PROXY that is not a number of proxies at start-up, rather than on a request", () => {
    expect(() => load({ CORE_TRUST_PROXY: "true" })).toThrow('CORE_TRUST_PROXY must be the number of proxies in front of the service, 0 to 16, got "true"');
    expect(() => load({ CORE_TRUST_PROXY: "2" })).not.toThrow();
  });
});
