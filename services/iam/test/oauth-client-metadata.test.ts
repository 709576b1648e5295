import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:https";
import type { IncomingMessage, ServerResponse } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { and, eq } from "drizzle-orm";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { testDatabases, type DatabaseHandle } from "@core/storage";
import { freshSeconds, isClientMetadataUrl, MAX_CLIENT_ID_LENGTH, MAX_DOCUMENT_BYTES } from "../src/client-metadata.js";
import { auditEvents, oauthClient } from "../src/db/schema.js";
import { createIam, freePort, iamWithOperator, staffedOrg, type Iam, type Operator } from "./support/harness.js";
import { PageBrowser } from "./support/pages.js";
import { authorizeAddress, consentAs, exchangeCode, LOOPBACK_REDIRECT, pkcePair, refreshGrant } from "./support/authorization-code.js";

/**
 * Client ID Metadata Documents (draft-ietf-oauth-client-id-metadata-document, MCP 2025-11-25; ADR
 * 0028): an https client id is resolved from the document at that address, served here by a real
 * local https server with a certificate made for the test, through the webhooks' SSRF guard.
 */

type Route = (req: IncomingMessage, res: ServerResponse) => void;

/** A self-signed certificate for localhost, made with the openssl command. */
function localhostCertificate(): { key: string; cert: string } {
  const dir = mkdtempSync(join(tmpdir(), "cimd-"));
  try {
    execFileSync("openssl", [
      "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1",
      "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
      "-keyout", join(dir, "key.pem"), "-out", join(dir, "cert.pem"),
    ], { stdio: "ignore" });
    return { key: readFileSync(join(dir, "key.pem"), "utf8"), cert: readFileSync(join(dir, "cert.pem"), "utf8") };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A document server: one route per path, and how often each path was asked for. */
class DocumentServer {
  readonly routes = new Map<string, Route>();
  readonly hits = new Map<string, number>();
  private server!: Server;
  base = "";
  private counter = 0;

  async start(tls: { key: string; cert: string }) {
    const port = await freePort();
    this.server = createServer(tls, (req, res) => {
      const path = req.url ?? "/";
      this.hits.set(path, (this.hits.get(path) ?? 0) + 1);
      const route = this.routes.get(path);
      if (route) return route(req, res);
      res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => this.server.listen(port, resolve));
    this.base = `https://localhost:${port}`;
  }

  stop() {
    this.server.closeAllConnections();
    return new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  /** A fresh client id (its path) served by `route`, or by a valid document of `fields`. */
  client(route?: (clientId: string) => Route, fields: Record<string, unknown> = {}, headers: Record<string, string> = {}): string {
    const path = `/clients/${++this.counter}.json`;
    const clientId = `${this.base}${path}`;
    this.routes.set(path, route ? route(clientId) : json(documentOf(clientId, fields), headers));
    return clientId;
  }

  hitsOf(clientId: string) {
    return this.hits.get(new URL(clientId).pathname) ?? 0;
  }
}

const documentOf = (clientId: string, fields: Record<string, unknown> = {}) => ({
  client_id: clientId,
  client_name: "Document agent",
  redirect_uris: [LOOPBACK_REDIRECT],
  grant_types: ["authorization_code", "refresh_token"],
  response_types: ["code"],
  token_endpoint_auth_method: "none",
  ...fields,
});

const json =
  (body: unknown, headers: Record<string, string> = {}): Route =>
  (_req, res) => {
    res.writeHead(200, { "content-type": "application/json", ...headers }).end(typeof body === "string" ? body : JSON.stringify(body));
  };

describe.each(testDatabases())("client metadata documents on $name", ({ open }) => {
  let database: DatabaseHandle;
  let iam: Iam;
  let guarded: Iam;
  let op: Operator;
  const documents = new DocumentServer();
  let member: { cookie: string };

  beforeAll(async () => {
    const tls = localhostCertificate();
    await documents.start(tls);
    // the document server is on loopback: only a test may allow that (config.clientMetadata.allowPrivate)
    ({ database, iam, op } = await iamWithOperator(open, { config: { clientMetadata: { enabled: true, timeoutMs: 2000, allowPrivate: true, ca: tls.cert } } }));
    guarded = await createIam(database, { config: { clientMetadata: { enabled: true, timeoutMs: 2000, allowPrivate: false, ca: tls.cert } } });
    member = (await staffedOrg(iam, op)).member;
  });
  // tests that move IAM's clock past a document's freshness put it back: the member's session lives by it too
  afterEach(() => iam.clock.set(new Date()));
  afterAll(async () => {
    await documents.stop();
    await database?.close();
  });

  /** A signed-in member's authorize request for `clientId`: where the browser is sent. */
  async function authorize(clientId: string, on: Iam = iam, redirectUri?: string) {
    const r = await new PageBrowser(on, member.cookie).get(authorizeAddress({ clientId, redirectUri }));
    expect(r.status, r.html).toBe(302);
    return new URL(r.location!, on.config.iamUrl);
  }

  /** The authorize request is refused on IAM's own error page, with `description` in its words, and no client is stored. */
  async function refusedOnErrorPage(clientId: string, description: string, on: Iam = iam) {
    const to = await authorize(clientId, on);
    expect(to.origin + to.pathname).toBe(`${on.config.iamUrl}/api/auth/error`);
    expect(to.searchParams.get("error")).toBe("invalid_client");
    expect(to.searchParams.get("error_description")).toContain(description);
    expect(await database.db.select().from(oauthClient).where(eq(oauthClient.clientId, clientId))).toEqual([]);
  }

  describe("discovery", () => {
    it("advertises client_id_metadata_document_supported", async () => {
      const metadata = (await (await iam.app.request("/.well-known/oauth-authorization-server")).json()) as Record<string, unknown>;
      expect(metadata.client_id_metadata_document_supported).toBe(true);
    });

    it("does not advertise it, nor fetch documents, with CORE_OAUTH_CLIENT_METADATA=off", async () => {
      const off = await createIam(database, { config: { clientMetadata: { enabled: false, timeoutMs: 2000, allowPrivate: true } } });
      const metadata = (await (await off.app.request("/.well-known/oauth-authorization-server")).json()) as Record<string, unknown>;
      expect(metadata.client_id_metadata_document_supported).toBeUndefined();
      const clientId = documents.client();
      const to = await authorize(clientId, off);
      expect(to.searchParams.get("error")).toBe("invalid_client");
      expect(documents.hitsOf(clientId)).toBe(0);
    });
  });

  describe("a client known by its document", () => {
    it("completes authorize, consent and the token exchange with PKCE, the consent page naming the document's host", async () => {
      const clientId = documents.client(undefined, { client_uri: "https://agent.example.com/", policy_uri: "javascript:alert(1)" });
      const pkce = pkcePair();
      const browser = new PageBrowser(iam, member.cookie);
      const asked = await browser.get(authorizeAddress({ clientId, challenge: pkce.challenge }));
      expect(asked.status).toBe(302);
      expect(asked.location!.startsWith("/oauth/consent?")).toBe(true);
      const consent = await browser.get(asked.location!);
      expect(consent.html).toContain("Document agent");
      expect(consent.html).toContain(`<dd id="consent-client-host">${new URL(clientId).host}</dd>`);
      const back = await consentAs(browser, { clientId, challenge: pkce.challenge });
      expect(back.origin + back.pathname).toBe(LOOPBACK_REDIRECT);
      const tokens = await exchangeCode(iam, clientId, back.searchParams.get("code")!, pkce.verifier);
      expect(tokens.status, JSON.stringify(tokens.body)).toBe(200);
      expect(tokens.body.access_token).toBeTruthy();
      expect(tokens.body.refresh_token).toBeTruthy();
      const [stored] = await database.db.select().from(oauthClient).where(eq(oauthClient.clientId, clientId));
      expect(stored).toMatchObject({ clientDiscoveryId: "cimd", name: "Document agent", tokenEndpointAuthMethod: "none", clientSecret: null, uri: "https://agent.example.com/", policy: null });
      const audited = await database.db.select().from(auditEvents).where(and(eq(auditEvents.action, "oauth.client.register"), eq(auditEvents.targetId, clientId)));
      expect(audited).toHaveLength(1);
      expect(audited[0]).toMatchObject({ outcome: "success", metadata: { source: "client_metadata_document" } });
    });

    it("keeps the document for its max-age, and fetches it again after", async () => {
      let name = "First name";
      const clientId = documents.client((id) => (req, res) => json(documentOf(id, { client_name: name }), { "cache-control": "max-age=600" })(req, res));
      await authorize(clientId);
      expect(documents.hitsOf(clientId)).toBe(1);
      name = "Second name";
      iam.clock.advance(599_000);
      await authorize(clientId);
      expect(documents.hitsOf(clientId)).toBe(1);
      iam.clock.advance(2_000);
      await authorize(clientId);
      expect(documents.hitsOf(clientId)).toBe(2);
      const [stored] = await database.db.select().from(oauthClient).where(eq(oauthClient.clientId, clientId));
      expect(stored!.name).toBe("Second name");
    });

    it("keeps the stored client while the document's host fails, and drops it when the document is withdrawn", async () => {
      let answer = 200;
      const clientId = documents.client((id) => (req, res) => (answer === 200 ? json(documentOf(id))(req, res) : res.writeHead(answer).end()));
      expect((await authorize(clientId)).pathname).toBe("/oauth/consent");
      answer = 503;
      iam.clock.advance(3600_000 + 1000);
      expect((await authorize(clientId)).pathname).toBe("/oauth/consent");
      expect(documents.hitsOf(clientId)).toBe(2);
      answer = 404;
      iam.clock.advance(5 * 60_000 + 1000);
      const to = await authorize(clientId);
      expect(to.pathname).toBe("/api/auth/error");
      expect(to.searchParams.get("error_description")).toContain("answered 404");
    });

    it("refuses a stored client whose host has not answered for a day past its refresh time", async () => {
      let answer = 200;
      const clientId = documents.client((id) => (req, res) => (answer === 200 ? json(documentOf(id))(req, res) : res.writeHead(answer).end()));
      expect((await authorize(clientId)).pathname).toBe("/oauth/consent");
      answer = 502;
      iam.clock.advance(3600_000 + 24 * 3600_000 - 1000);
      expect((await authorize(clientId)).pathname).toBe("/oauth/consent");
      iam.clock.advance(2000);
      const to = await authorize(clientId);
      expect(to.pathname).toBe("/api/auth/error");
      expect(to.searchParams.get("error_description")).toContain("answered 502");
    });
  });

  describe("refusals", () => {
    it("refuses a document whose client_id is not its address", async () => {
      const clientId = documents.client(undefined, { client_id: `${documents.base}/clients/other.json` });
      await refusedOnErrorPage(clientId, "client_id is not the address");
      const [audited] = await database.db.select().from(auditEvents).where(and(eq(auditEvents.action, "oauth.client.register"), eq(auditEvents.targetId, clientId)));
      expect(audited).toMatchObject({ outcome: "failure", metadata: { source: "client_metadata_document", reason: expect.stringContaining("client_id is not the address") } });
    });

    it("never redirects to a redirect URI the document does not list", async () => {
      const clientId = documents.client();
      const to = await authorize(clientId, iam, "http://127.0.0.1:7777/elsewhere");
      expect(to.origin).toBe(iam.config.iamUrl);
      expect(to.searchParams.get("error")).toBe("invalid_redirect");
    });

    it("refuses an https redirect URI at another origin than the document's", async () => {
      const clientId = documents.client(undefined, { redirect_uris: ["https://elsewhere.example.com/callback"] });
      await refusedOnErrorPage(clientId, "neither https at");
    });

    it(`accepts a document of exactly ${MAX_DOCUMENT_BYTES} bytes and refuses one byte more`, async () => {
      const sized = (id: string, bytes: number) => {
        const base = JSON.stringify({ ...documentOf(id), padding: "" });
        return JSON.stringify({ ...documentOf(id), padding: "x".repeat(bytes - base.length) });
      };
      const inside = documents.client((id) => json(sized(id, MAX_DOCUMENT_BYTES)));
      expect((await authorize(inside)).pathname).toBe("/oauth/consent");
      const outside = documents.client((id) => json(sized(id, MAX_DOCUMENT_BYTES + 1)));
      await refusedOnErrorPage(outside, `larger than ${MAX_DOCUMENT_BYTES} bytes`);
    });

    it("refuses a document too big that does not say its length", async () => {
      const clientId = documents.client((id) => (_req, res) => {
        res.writeHead(200, { "content-type": "application/json" });
        res.write(JSON.stringify({ ...documentOf(id), padding: "x".repeat(MAX_DOCUMENT_BYTES) }).slice(0, 4000));
        res.end("x".repeat(MAX_DOCUMENT_BYTES));
      });
      await refusedOnErrorPage(clientId, "larger than");
    });

    it("refuses a document not served as JSON, and one that is not JSON", async () => {
      const html = documents.client((id) => (_req, res) => res.writeHead(200, { "content-type": "text/html" }).end(JSON.stringify(documentOf(id))));
      await refusedOnErrorPage(html, "not served as application/json");
      const broken = documents.client(() => json("{ not json"));
      await refusedOnErrorPage(broken, "not valid JSON");
    });

    it("refuses a host that does not answer in time, before its headers or within its body", async () => {
      await refusedOnErrorPage(documents.client(() => () => undefined), "did not answer within 2000 ms");
      const stalled = documents.client((id) => (_req, res) => {
        res.writeHead(200, { "content-type": "application/json" });
        res.write(JSON.stringify(documentOf(id)).slice(0, 20));
      });
      await refusedOnErrorPage(stalled, "did not answer within 2000 ms");
    });

    it("does not follow a redirect from the document's address", async () => {
      const target = documents.client();
      const clientId = documents.client(() => (_req, res) => res.writeHead(302, { location: target }).end());
      await refusedOnErrorPage(clientId, "redirect");
      expect(documents.hitsOf(target)).toBe(0);
    });

    it("refuses a document on a loopback address through the SSRF guard", async () => {
      const clientId = documents.client();
      await refusedOnErrorPage(clientId, "loopback or private address", guarded);
      expect(documents.hitsOf(clientId)).toBe(0);
    });

    it("refuses a document carrying a client secret, or asking for one", async () => {
      await refusedOnErrorPage(documents.client(undefined, { client_secret: "shared" }), "contains a client secret");
      await refusedOnErrorPage(documents.client(undefined, { token_endpoint_auth_method: "client_secret_basic" }), 'token_endpoint_auth_method "none"');
    });

    it("looks up no http client id: it is an unknown client", async () => {
      const clientId = documents.client().replace("https:", "http:");
      const to = await authorize(clientId);
      expect(to.searchParams.get("error")).toBe("invalid_client");
      expect(documents.hitsOf(clientId)).toBe(0);
    });

    it("refuses a refresh once the client's document is withdrawn", async () => {
      let withdrawn = false;
      const clientId = documents.client((id) => (req, res) => (withdrawn ? res.writeHead(404).end() : json(documentOf(id))(req, res)));
      const pkce = pkcePair();
      const back = await consentAs(new PageBrowser(iam, member.cookie), { clientId, challenge: pkce.challenge });
      const tokens = await exchangeCode(iam, clientId, back.searchParams.get("code")!, pkce.verifier);
      expect(tokens.status).toBe(200);
      withdrawn = true;
      iam.clock.advance(3600_000 + 1000);
      const r = await refreshGrant(iam, clientId, tokens.body.refresh_token);
      expect(r.status).toBe(400);
      expect(r.body.error).toBe("invalid_client");
      expect(r.body.error_description).toContain("answered 404");
    });
  });
});

describe("how long a document stays fresh", () => {
  it.each([
    [null, 3600],
    ["max-age=600", 600],
    ["public, max-age=300", 300],
    ["max-age=299", 300],
    ["max-age=86400", 86400],
    ["max-age=86401", 86400],
    ["no-store", 300],
    ["no-cache, max-age=3600", 300],
    ["max-age=soon", 3600],
  ])("Cache-Control %s → %i s", (cacheControl, seconds) => {
    expect(freshSeconds(cacheControl)).toBe(seconds);
  });
});

describe("which client ids are document addresses (draft §3)", () => {
  it.each([
    ["https://agent.example.com/client.json", true],
    ["https://agent.example.com:8443/oauth/client", true],
    ["https://agent.example.com/client?v=1", true],
    ["http://agent.example.com/client.json", false],
    ["https://agent.example.com", false],
    ["https://agent.example.com/", false],
    ["https://agent.example.com/a/../client.json", false],
    ["https://agent.example.com/./client.json", false],
    ["https://agent.example.com/client.json#x", false],
    ["https://user:pw@agent.example.com/client.json", false],
    ["https://agent.example.com:443/client.json", false],
    ["https://Agent.example.com/client.json", false],
    ["not a url", false],
  ])("%s → %s", (clientId, expected) => {
    expect(isClientMetadataUrl(clientId)).toBe(expected);
  });

  it(`looks up ids of up to ${MAX_CLIENT_ID_LENGTH} characters`, () => {
    const base = "https://agent.example.com/";
    expect(isClientMetadataUrl(base + "a".repeat(MAX_CLIENT_ID_LENGTH - base.length))).toBe(true);
    expect(isClientMetadataUrl(base + "a".repeat(MAX_CLIENT_ID_LENGTH - base.length + 1))).toBe(false);
  });
});
