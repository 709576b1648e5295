import { createLocalJWKSet, exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ResourceUpdatedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { manualClock } from "@core/kit";
import { iamKeySet, remoteResolvers, ServiceTokenClient, type Principal } from "@core/service-auth";
import { deadUrl, principal, startFakeIam, type FakeIam } from "../../../packages/service-auth/test/support/fake-iam.js";
import { VaultAccess } from "../src/access.js";
import { connectClient, servedVault } from "./support/vault-server.js";

/**
 * The vault as an OAuth protected resource (issue 29): access tokens of IAM's contract signed with a
 * key set of the test's own (the `keys` override), session tokens and API keys asked of a fake IAM
 * over real HTTP, a real server, raw requests and the SDK's client.
 */
const SECRET = "vault-secret-for-tests";
const KID = "vault-test-key";
const clock = manualClock(new Date());
const nowSeconds = () => Math.floor(clock.now().getTime() / 1000);

let iam: FakeIam;
let signing: CryptoKey;
let foreign: CryptoKey;
let publicJwk: JWK;

beforeAll(async () => {
  iam = await startFakeIam();
  iam.serviceSecrets.set("vault", SECRET);
  const pair = await generateKeyPair("EdDSA", { crv: "Ed25519", extractable: true });
  signing = pair.privateKey;
  publicJwk = { ...(await exportJWK(pair.publicKey)), kid: KID, alg: "EdDSA", use: "sig" };
  foreign = (await generateKeyPair("EdDSA", { crv: "Ed25519" })).privateKey;
});
afterAll(async () => {
  await iam?.close();
});

const served = servedVault({
  client: false,
  serving: {
    access: (resource) => {
      const keys = createLocalJWKSet({ keys: [publicJwk] });
      const tokens = new ServiceTokenClient(iam.url, { serviceId: "vault", secret: SECRET });
      return new VaultAccess({ resource, issuer: iam.url, keys, credentials: remoteResolvers({ iamUrl: iam.url, serviceId: "vault", tokens, keys, clock }), clock });
    },
  },
});

const resource = () => served.server.mcpUrl;
const metadataUrl = () => `${served.server.url}/.well-known/oauth-protected-resource/mcp`;

/** An access token as IAM issues it for the vault (the contract of ADR 0028), with claims or header changed (null removes a claim). */
async function accessToken(claims: Record<string, unknown> = {}, options: { typ?: string; key?: CryptoKey } = {}): Promise<string> {
  const iat = nowSeconds();
  const all: Record<string, unknown> = {
    iss: iam.url,
    aud: resource(),
    sub: "usr_reader",
    iat,
    exp: iat + 600,
    scope: "vault:read offline_access",
    client_id: "client-1",
    org_id: "org_tenant",
    permissions: ["platform:read", "vault:read"],
    ...claims,
  };
  for (const [name, value] of Object.entries(all)) if (value === null) delete all[name];
  return new SignJWT(all).setProtectedHeader({ alg: "EdDSA", typ: options.typ ?? "at+jwt", kid: KID }).sign(options.key ?? signing);
}

const TOOL_CALL = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "read_doc", arguments: { path: "services/iam" } } });

async function call(headers: Record<string, string>) {
  const response = await fetch(resource(), { method: "POST", headers: { "content-type": "application/json", ...headers }, body: TOOL_CALL });
  return { status: response.status, challenge: response.headers.get("www-authenticate"), body: (await response.json()) as any };
}
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

let unique = 0;
/** A session token the fake IAM knows, for a person with these permissions. */
function session(overrides: Partial<Principal> = {}): string {
  const token = `session-${process.pid}-${unique++}`;
  iam.sessions.set(token, principal({ permissions: ["platform:read", "vault:read"], ...overrides }));
  return token;
}

describe("refusals, each with the challenge that sends a client to the metadata", () => {
  it("answers a request without credential 401 with only resource_metadata in the challenge, in the error envelope", async () => {
    const answer = await call({});
    expect(answer.status).toBe(401);
    expect(answer.challenge).toBe(`Bearer resource_metadata="${metadataUrl()}"`);
    expect(answer.body).toEqual({
      error: { code: "UNAUTHENTICATED", message: expect.stringContaining("Authentication required"), requestId: expect.any(String), details: null },
    });
  });

  it("refuses the stream and the end of a session without credential too", async () => {
    expect((await fetch(resource(), { headers: { accept: "text/event-stream", "mcp-session-id": "x" } })).status).toBe(401);
    expect((await fetch(resource(), { method: "DELETE", headers: { "mcp-session-id": "x" } })).status).toBe(401);
  });

  const invalid = `Bearer error="invalid_token", resource_metadata="`;
  it.each([
    ["an expired token (beyond 5 s of clock skew)", () => accessToken({ iat: nowSeconds() - 700, exp: nowSeconds() - 6 }), "The access token has expired"],
    ["a token for another audience", () => accessToken({ aud: "http://127.0.0.1:1/mcp" }), "Invalid access token"],
    ["a token for the vault's origin without /mcp", () => accessToken({ aud: served.server.url }), "Invalid access token"],
    ["a token from another issuer", () => accessToken({ iss: "https://elsewhere.example" }), "Invalid access token"],
    ["a service token (typed service, addressed to the vault's id)", () => accessToken({ aud: "vault", typ: "service", scope: null, permissions: null }, { typ: "JWT" }), "Invalid access token"],
    ["a token with the vault's audience not typed at+jwt", () => accessToken({}, { typ: "JWT" }), "Invalid access token"],
    ["a token signed by a key IAM does not publish", () => accessToken({}, { key: foreign }), "Invalid access token"],
    ["a token without exp", () => accessToken({ exp: null }), "Invalid access token"],
  ])("answers %s 401 invalid_token", async (_, token, message) => {
    const answer = await call(bearer(await token()));
    expect(answer.status).toBe(401);
    expect(answer.challenge).toBe(`${invalid}${metadataUrl()}"`);
    expect(answer.body.error).toMatchObject({ code: "UNAUTHENTICATED", message });
  });

  it("answers a token whose payload was changed after signing 401", async () => {
    const [header, , signature] = (await accessToken()).split(".");
    const payload = Buffer.from(JSON.stringify({ iss: iam.url, aud: resource(), sub: "usr_admin", iat: nowSeconds(), exp: nowSeconds() + 60, scope: "vault:read", permissions: ["vault:read"] })).toString("base64url");
    expect((await call(bearer(`${header}.${payload}.${signature}`))).status).toBe(401);
  });

  const insufficient = () => `Bearer error="insufficient_scope", scope="vault:read", resource_metadata="${metadataUrl()}"`;
  it("answers a token whose person does not hold vault:read 403 insufficient_scope", async () => {
    const answer = await call(bearer(await accessToken({ permissions: ["platform:read"] })));
    expect(answer.status).toBe(403);
    expect(answer.challenge).toBe(insufficient());
    expect(answer.body.error).toMatchObject({ code: "FORBIDDEN", message: "Reading the vault needs the permission vault:read" });
  });

  it("answers a token not granted the scope vault:read 403 insufficient_scope, whatever the person holds", async () => {
    const answer = await call(bearer(await accessToken({ scope: "offline_access" })));
    expect(answer.status).toBe(403);
    expect(answer.challenge).toBe(insufficient());
    expect(answer.body.error.message).toBe("The access token was not granted the scope vault:read");
  });

  it("answers a session token IAM does not know 401 invalid_token, and one whose person lacks vault:read 403", async () => {
    const unknown = await call(bearer("no-such-session-token"));
    expect(unknown.status).toBe(401);
    expect(unknown.challenge).toBe(`${invalid}${metadataUrl()}"`);
    const member = await call(bearer(session({ permissions: ["platform:read"] })));
    expect(member.status).toBe(403);
    expect(member.challenge).toBe(insufficient());
  });

  it("answers an API key IAM does not know 401", async () => {
    const answer = await call({ "x-api-key": "core_no_such_key" });
    expect(answer.status).toBe(401);
    expect(answer.challenge).toBe(`${invalid}${metadataUrl()}"`);
  });

  it("answers 503 when IAM cannot check a session token: an outage, not a wrong credential", async () => {
    iam.failWith = 503;
    try {
      const answer = await call(bearer(session()));
      expect(answer.status).toBe(503);
      expect(answer.challenge).toBeNull();
      expect(answer.body.error.code).toBe("UPSTREAM_UNAVAILABLE");
    } finally {
      iam.failWith = undefined;
    }
  });
});

describe("the credentials the vault takes", () => {
  const readsIam = (answer: { status: number; body: any }) => {
    expect(answer.status).toBe(200);
    expect(answer.body.result.content[0].text).toContain("services/iam");
  };

  it("serves an access token of IAM's contract, its audience a string or an array naming the vault", async () => {
    readsIam(await call(bearer(await accessToken())));
    readsIam(await call(bearer(await accessToken({ aud: ["https://other.example/mcp", resource()] }))));
  });

  it("serves a token expired less than 5 s ago (clock skew)", async () => {
    readsIam(await call(bearer(await accessToken({ exp: nowSeconds() - 4 }))));
  });

  it("serves the CLI's session token and an API key whose person holds vault:read, an operator's as anyone's", async () => {
    readsIam(await call(bearer(session())));
    readsIam(await call(bearer(session({ orgType: "core-operator", orgId: "org_core", role: "owner" }))));
    const key = `core_key_${unique++}`;
    iam.apiKeys.set(key, principal({ type: "apikey", apiKeyId: "key_1", sessionId: null, permissions: ["vault:read"] }));
    readsIam(await call({ "x-api-key": key }));
  });
});

describe("the protected resource metadata (RFC 9728)", () => {
  it("is served at both addresses, naming the vault's MCP URL exactly and IAM", async () => {
    for (const path of ["/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"]) {
      const response = await fetch(`${served.server.url}${path}`);
      expect(response.status, path).toBe(200);
      expect(await response.json()).toEqual({
        resource: resource(),
        authorization_servers: [iam.url],
        scopes_supported: ["vault:read", "offline_access"],
        bearer_methods_supported: ["header"],
        resource_name: "Core architecture vault",
      });
    }
  });

  it("needs no credential", async () => {
    expect((await fetch(metadataUrl(), { headers: bearer("garbage") })).status).toBe(200);
  });
});

describe("sessions under auth", () => {
  it("lets the SDK client subscribe with an access token, and is bound to its person: another person naming it gets 404", async () => {
    const token = await accessToken();
    const client = await connectClient(resource(), bearer(token));
    try {
      const updated: string[] = [];
      client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => void updated.push(n.params.uri));
      await client.subscribeResource({ uri: "vault://concepts/tenancy" });
      const sessionId = (client.transport as unknown as { sessionId: string }).sessionId;
      expect(sessionId).toMatch(/^[0-9a-f-]{36}$/);

      const other = bearer(await accessToken({ sub: "usr_someone_else" }));
      const subscribe = JSON.stringify({ jsonrpc: "2.0", id: 2, method: "resources/subscribe", params: { uri: "vault://services/iam" } });
      const headers = { "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-session-id": sessionId };
      expect((await fetch(resource(), { method: "POST", headers: { ...headers, ...other }, body: subscribe })).status).toBe(404);
      expect((await fetch(resource(), { headers: { accept: "text/event-stream", "mcp-session-id": sessionId, ...other } })).status).toBe(404);
      expect((await fetch(resource(), { method: "DELETE", headers: { "mcp-session-id": sessionId, ...other } })).status).toBe(404);
      // the same person with another credential (a refreshed token, the CLI's session) is the same owner
      expect((await fetch(resource(), { method: "POST", headers: { ...headers, ...bearer(session({ userId: "usr_reader" })) }, body: subscribe })).status).toBe(200);

      await client.listTools();
      served.files.write("concepts/tenancy.md", "---\ntitle: Tenancy\n---\n# Tenancy\nChanged under auth.\n");
      await expect.poll(() => updated, { timeout: 5_000 }).toContain("vault://concepts/tenancy");
    } finally {
      await client.close();
    }
  });

  it("holds at most 16 sessions per person: the 17th ends that person's least recently used, and nobody else's", async () => {
    const open = async (token: string) => {
      const response = await fetch(resource(), {
        method: "POST",
        headers: { "content-type": "application/json", ...bearer(token) },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "1" } } }),
      });
      await response.body?.cancel();
      return response.headers.get("mcp-session-id")!;
    };
    const subscribe = async (token: string, sessionId: string) =>
      (
        await fetch(resource(), {
          method: "POST",
          headers: { "content-type": "application/json", "mcp-session-id": sessionId, ...bearer(token) },
          body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "resources/subscribe", params: { uri: "vault://services/iam" } }),
        })
      ).status;
    const other = await accessToken({ sub: "usr_bystander" });
    const bystander = await open(other);
    const many = await accessToken({ sub: "usr_many" });
    const ids: string[] = [];
    for (let i = 0; i < 16; i++) ids.push(await open(many));
    expect(await subscribe(many, ids[0]!)).toBe(200);
    await open(many);
    // the first was used since: the second was the least recently used
    expect(await subscribe(many, ids[1]!)).toBe(404);
    expect(await subscribe(many, ids[0]!)).toBe(200);
    expect(await subscribe(many, ids[15]!)).toBe(200);
    expect(await subscribe(other, bystander)).toBe(200);
  });

  it("checks the credential on every request of a session: once the token expires, its next request is refused", async () => {
    const token = await accessToken({ exp: nowSeconds() + 60 });
    const client = await connectClient(resource(), bearer(token));
    try {
      await client.listTools();
      clock.advance(66_000);
      await expect(client.listTools()).rejects.toThrow(/401|Unauthorized|expired/i);
    } finally {
      await client.close().catch(() => {});
    }
  });
});

describe("IAM's key set out of reach", () => {
  let gone: string;
  beforeAll(async () => {
    gone = await deadUrl();
  });
  const cut = servedVault({
    client: false,
    serving: {
      access: (resource) => {
        const keys = iamKeySet(gone, "vault");
        const tokens = new ServiceTokenClient(gone, { serviceId: "vault", secret: SECRET });
        return new VaultAccess({ resource, issuer: iam.url, keys, credentials: remoteResolvers({ iamUrl: gone, serviceId: "vault", tokens, keys, clock }), clock });
      },
    },
  });

  it("answers an access token 503 when the keys to check it cannot be fetched: an outage, not a wrong token", async () => {
    const token = await accessToken({ aud: cut.server.mcpUrl });
    const response = await fetch(cut.server.mcpUrl, { method: "POST", headers: { "content-type": "application/json", ...bearer(token) }, body: TOOL_CALL });
    expect(response.status).toBe(503);
    expect(response.headers.get("www-authenticate")).toBeNull();
    expect(((await response.json()) as any).error.code).toBe("UPSTREAM_UNAVAILABLE");
  });
});

describe("with CORE_VAULT_AUTH=off", () => {
  const open = servedVault({ client: false });

  it("serves MCP without credential and has no resource metadata (404)", async () => {
    const response = await fetch(open.server.mcpUrl, { method: "POST", headers: { "content-type": "application/json" }, body: TOOL_CALL });
    expect(response.status).toBe(200);
    for (const path of ["/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"]) {
      const metadata = await fetch(`${open.server.url}${path}`);
      expect(metadata.status).toBe(404);
      expect(((await metadata.json()) as any).error.code).toBe("NOT_FOUND");
    }
  });
});
