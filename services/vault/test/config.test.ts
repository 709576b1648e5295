import { describe, expect, it } from "vitest";
import { ConfigError, loadCommonConfig, silentLogger } from "@core/kit";
import { loadVaultConfig } from "../src/config.js";
import { buildService } from "../src/index.js";

const contextOf = (env: Record<string, string>, serviceCredentials: Map<string, string>) => ({
  name: "vault" as const,
  common: loadCommonConfig(env),
  db: undefined,
  pingDatabase: async () => {},
  logger: silentLogger(),
  serviceCredentials,
  env,
});

describe("CORE_VAULT_AUTH", () => {
  it("is required by default with DATABASE_URL, and off by default on the embedded database", () => {
    expect(loadVaultConfig({ DATABASE_URL: "postgres://db/core" }).auth).toBe("required");
    expect(loadVaultConfig({}).auth).toBe("off");
  });

  it("takes required or off whatever the database", () => {
    expect(loadVaultConfig({ CORE_VAULT_AUTH: "required" }).auth).toBe("required");
    expect(loadVaultConfig({ DATABASE_URL: "postgres://db/core", CORE_VAULT_AUTH: "off" }).auth).toBe("off");
  });

  it("refuses any other value at start, saying which are taken", () => {
    for (const wrong of ["on", "Required", "true"]) {
      expect(() => loadVaultConfig({ CORE_VAULT_AUTH: wrong })).toThrow(new ConfigError(`CORE_VAULT_AUTH must be required or off, got "${wrong}"`));
    }
  });

  it("with auth required, names its public MCP URL as the resource and IAM's as its authorization server", async () => {
    const env = { CORE_VAULT_AUTH: "required", CORE_VAULT_URL: "https://vault.example.com/mcp", CORE_IAM_URL: "https://iam.example.com" };
    const built = await buildService(contextOf(env, new Map([["vault", "a-secret"]])));
    try {
      const metadata = await built.fetch(new Request("http://127.0.0.1/.well-known/oauth-protected-resource/mcp"));
      expect(await metadata.json()).toMatchObject({ resource: "https://vault.example.com/mcp", authorization_servers: ["https://iam.example.com"] });
      const refused = await built.fetch(new Request("http://127.0.0.1/mcp", { method: "POST", headers: { "content-type": "application/json" }, body: "{}" }));
      expect(refused.status).toBe(401);
      expect(refused.headers.get("www-authenticate")).toBe('Bearer resource_metadata="https://vault.example.com/.well-known/oauth-protected-resource/mcp"');
      // IAM out of reach does not make the vault unhealthy: access tokens verify against the keys it holds
      const health = await built.fetch(new Request("http://127.0.0.1/health"));
      expect(health.status).toBe(200);
      expect(Object.keys(((await health.json()) as { checks: object }).checks)).toEqual(["vault"]);
    } finally {
      await built.close();
    }
  });

  it("with auth required, the vault needs its service credential to ask IAM, and says so at start", async () => {
    await expect(buildService(contextOf({ CORE_VAULT_AUTH: "required" }, new Map()))).rejects.toThrow("No service credential for vault: set CORE_SERVICE_CREDENTIALS to include vault:<secret>");
  });
});
