import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { discoverAuthorizationServerMetadata, discoverOAuthProtectedResourceMetadata, UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { Browsers, hasChromium, look, requireBrowserOrSkip } from "../../../test/support/chromium.js";
import { outputOf } from "./support/vault-server.js";
import {
  decodeJwt,
  launchDatabases,
  launchProtectedSystem,
  LoopbackCallback,
  MemoryOAuthClient,
  personWithOrganization,
  signIn,
  signInAndAllow,
  type Person,
  type ProtectedSystem,
} from "./support/protected-vault.js";

requireBrowserOrSkip();

/** One request the SDK client sent: what it asked, and for the token endpoint, which grant. */
interface Sent {
  method: string;
  url: string;
  grant: string | null;
}

/** `fetch` that writes down what goes through it, handed to the transport (the SDK's OAuth requests use it too). */
function recordingFetch(sent: Sent[]): typeof fetch {
  return async (input, init) => {
    const url = input instanceof Request ? input.url : String(input);
    const body = init?.body;
    const grant = body instanceof URLSearchParams ? body.get("grant_type") : typeof body === "string" && body.includes("grant_type=") ? new URLSearchParams(body).get("grant_type") : null;
    sent.push({ method: init?.method ?? "GET", url, grant });
    return fetch(input, init);
  };
}

/**
 * The whole OAuth flow an MCP agent goes through to read the protected vault (issue 29), with the
 * official SDK's client and its own OAuth support against the real IAM and vault started as
 * `npm start` runs them: discovery from the vault's 401, registration, sign-in and consent in
 * Chromium, the code at a loopback redirect, the token, a tool call, and a refresh.
 */
for (const { name, url } of launchDatabases()) {
  describe.skipIf(!hasChromium)(`an MCP agent connects to the protected vault through OAuth (${name})`, { timeout: 120_000 }, () => {
    let system: ProtectedSystem;
    let person: Person;
    const browsers = new Browsers();

    beforeAll(async () => {
      system = await launchProtectedSystem(url);
      person = await personWithOrganization(system.iamUrl);
    }, 120_000);
    // one Chromium at a time: each test's browser is closed when it ends
    afterEach(() => browsers.close());
    afterAll(async () => {
      await system?.stop();
    });

    it("publishes what a client discovers: the vault's 401 points at its metadata, which names IAM, whose metadata offers S256 and registration", async () => {
      const refused = await fetch(system.mcpUrl, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
      });
      expect(refused.status).toBe(401);
      const challenge = refused.headers.get("www-authenticate") ?? "";
      expect(challenge).toMatch(/^Bearer /);
      const metadataUrl = /resource_metadata="([^"]+)"/.exec(challenge)?.[1];
      expect(metadataUrl).toBeDefined();
      expect(new URL(metadataUrl!).origin).toBe(system.vaultUrl);

      // read as the SDK reads them
      const resource = await discoverOAuthProtectedResourceMetadata(system.mcpUrl, { resourceMetadataUrl: metadataUrl });
      expect(resource.resource).toBe(system.mcpUrl);
      expect(resource.authorization_servers).toHaveLength(1);
      const issuer = resource.authorization_servers![0]!;
      expect(new URL(issuer).origin).toBe(system.iamUrl);
      expect(resource.scopes_supported).toEqual(expect.arrayContaining(["vault:read", "offline_access"]));

      const server = await discoverAuthorizationServerMetadata(issuer);
      expect(server).toBeDefined();
      expect(server!.issuer).toBe(issuer);
      expect(server!.code_challenge_methods_supported).toEqual(["S256"]);
      expect(server!.registration_endpoint).toMatch(new RegExp(`^${system.iamUrl}/`));
      expect(server!.grant_types_supported).toEqual(expect.arrayContaining(["authorization_code", "refresh_token"]));
      expect(server!.response_types_supported).toContain("code");
    });

    it("registers, authorizes in the browser, calls search_docs with the token, and refreshes it when the vault refuses it", async () => {
      const callback = await new LoopbackCallback().listen();
      const oauth = new MemoryOAuthClient(callback.url);
      const sent: Sent[] = [];
      const transport = () => new StreamableHTTPClientTransport(new URL(system.mcpUrl), { authProvider: oauth, fetch: recordingFetch(sent) });
      try {
        // 1. no token: the SDK discovers, registers and asks for the user's browser
        const first = new Client({ name: "oauth-agent-test", version: "1.0.0" });
        const firstTransport = transport();
        await expect(first.connect(firstTransport)).rejects.toBeInstanceOf(UnauthorizedError);
        expect(oauth.clientInformation()?.client_id).toBeTruthy();
        const asks = (method: string, prefix: string) => sent.some((s) => s.method === method && s.url.startsWith(prefix));
        expect(asks("GET", `${system.vaultUrl}/.well-known/oauth-protected-resource`)).toBe(true);
        expect(asks("GET", `${system.iamUrl}/.well-known/oauth-authorization-server`)).toBe(true);
        expect(asks("POST", `${system.iamUrl}/api/auth/oauth2/register`)).toBe(true);
        const authorization = await oauth.authorizationUrl;
        expect(authorization.origin).toBe(system.iamUrl);
        const asked = authorization.searchParams;
        expect(asked.get("response_type")).toBe("code");
        expect(asked.get("code_challenge_method")).toBe("S256");
        expect(asked.get("code_challenge")).toMatch(/^[A-Za-z0-9_-]{43}$/);
        expect(asked.get("resource")).toBe(system.mcpUrl);
        expect(asked.get("redirect_uri")).toBe(callback.url);
        expect(asked.get("scope")?.split(" ")).toEqual(expect.arrayContaining(["vault:read", "offline_access"]));

        // 2. the person signs in and allows; the browser lands on the loopback redirect
        const page = await browsers.fresh();
        await page.goto(authorization.href);
        await signInAndAllow(page, person);
        const answer = await callback.received;
        expect(answer.get("error")).toBeNull();
        expect(oauth.isOwnState(answer.get("state"))).toBe(true);
        expect(await page.locator("h1").innerText()).toBe("You can close this window");

        // 3. the code for tokens: an audience-bound access token and a refresh token
        await firstTransport.finishAuth(answer.get("code")!);
        const issued = oauth.tokens()!;
        expect(issued.token_type.toLowerCase()).toBe("bearer");
        expect(issued.refresh_token).toBeTruthy();
        const { header, payload } = decodeJwt(issued.access_token);
        expect(header.typ).toBe("at+jwt");
        expect(payload.aud === system.mcpUrl || (Array.isArray(payload.aud) && payload.aud.includes(system.mcpUrl))).toBe(true);
        // the organization the person acts in, and what they may do there
        expect(payload.org_id).toBe(person.orgId);
        expect(payload.permissions).toContain("vault:read");
        expect(sent.filter((s) => s.grant === "authorization_code")).toHaveLength(1);
        await first.close();

        // 4. connected with the token: a tool call answers
        const agent = new Client({ name: "oauth-agent-test", version: "1.0.0" });
        await agent.connect(transport());
        const found = outputOf(await agent.callTool({ name: "search_docs", arguments: { query: "vault", limit: 3 } }));
        expect(found.length).toBeGreaterThan(0);
        expect(found[0]).toEqual(expect.objectContaining({ path: expect.any(String), title: expect.any(String) }));

        // 5. the access token stops working: the vault answers 401, the SDK refreshes and retries
        oauth.spoilAccessToken();
        const before = oauth.savedTokens.length;
        const again = outputOf(await agent.callTool({ name: "search_docs", arguments: { query: "tenancy", limit: 1 } }));
        expect(again).toHaveLength(1);
        expect(sent.filter((s) => s.grant === "refresh_token")).toHaveLength(1);
        expect(oauth.savedTokens.length).toBe(before + 1);
        const refreshed = oauth.tokens()!;
        expect(refreshed.access_token).not.toBe(issued.access_token);
        // refresh tokens rotate on use
        expect(refreshed.refresh_token).toBeTruthy();
        expect(refreshed.refresh_token).not.toBe(issued.refresh_token);
        await agent.close();
      } finally {
        await callback.close();
      }
    });

    it("shows the consent page, and Deny sends the client access_denied and no code", async () => {
      const callback = await new LoopbackCallback().listen();
      const oauth = new MemoryOAuthClient(callback.url, "Agent to deny");
      try {
        const client = new Client({ name: "oauth-agent-test", version: "1.0.0" });
        await expect(client.connect(new StreamableHTTPClientTransport(new URL(system.mcpUrl), { authProvider: oauth }))).rejects.toBeInstanceOf(UnauthorizedError);
        const page = await browsers.fresh();
        await page.goto((await oauth.authorizationUrl).href);
        await signIn(page, person);
        const deny = page.getByRole("button", { name: "Deny", exact: true });
        await deny.waitFor();
        // the person sees who asks and for what
        expect(await page.locator("main").innerText()).toContain("Agent to deny");
        await look(page, "oauth-consent");
        await deny.click();
        const answer = await callback.received;
        expect(answer.get("error")).toBe("access_denied");
        expect(answer.get("code")).toBeNull();
        expect(oauth.tokens()).toBeUndefined();
      } finally {
        await callback.close();
      }
    });
  });
}
