import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Page } from "playwright-core";
import type { OAuthClientProvider } from "@modelcontextprotocol/sdk/client/auth.js";
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from "@modelcontextprotocol/sdk/shared/auth.js";
import { openFreshPostgres } from "@core/storage";
import { freePort } from "../../../iam/test/support/harness.js";
import { fetchRetrying, launch, replicaPorts, type Launched } from "../../../../test/support/launched.js";

export const PASSWORD = "correct-horse-battery";

/** The databases a launched system runs on: the embedded one always, PostgreSQL when the run has one. */
export function launchDatabases(): { name: string; url: string | undefined }[] {
  const url = process.env.TEST_DATABASES === "pglite" ? undefined : process.env.TEST_DATABASE_URL;
  return [{ name: "embedded database", url: undefined }, ...(url ? [{ name: "PostgreSQL", url }] : [])];
}

export interface ProtectedSystem {
  iamUrl: string;
  /** the vault's address without `/mcp` (CORE_VAULT_URL) */
  vaultUrl: string;
  /** the MCP endpoint, which is also the OAuth resource the tokens are for */
  mcpUrl: string;
  launched: Launched;
  stop(): Promise<void>;
}

/**
 * `npm start` as an operator runs it with the vault protected: every service in one process, on the
 * embedded database or on a fresh PostgreSQL database, with `CORE_VAULT_AUTH=required` (the default
 * with `DATABASE_URL`, said here for the embedded run too). Addresses are 127.0.0.1, so the
 * discovery documents name what the test reaches.
 */
export async function launchProtectedSystem(postgresUrl?: string): Promise<ProtectedSystem> {
  const dataDir = mkdtempSync(join(tmpdir(), "core-protected-vault-"));
  const database = postgresUrl ? await openFreshPostgres(postgresUrl) : undefined;
  const ports = await replicaPorts(1);
  const iamUrl = ports.url("iam", 0);
  const vaultUrl = ports.url("vault", 0);
  const launched = launch({
    ...ports.env,
    ...(database ? { DATABASE_URL: database.url } : {}),
    CORE_DATA_DIR: dataDir,
    CORE_IAM_URL: iamUrl,
    CORE_VAULT_URL: vaultUrl,
    CORE_BILLING_URL: ports.url("billing", 0),
    CORE_STACK_REGISTRY_URL: ports.url("stack-registry", 0),
    CORE_PLATFORM_REGISTRY_URL: ports.url("platform-registry", 0),
    CORE_VAULT_AUTH: "required",
    CORE_RATE_LIMIT: "off",
    LOG_LEVEL: "warn",
  });
  const stop = async () => {
    await launched.stop();
    await database?.close();
    rmSync(dataDir, { recursive: true, force: true });
  };
  try {
    await launched.running;
  } catch (err) {
    await stop();
    throw err;
  }
  return { iamUrl, vaultUrl, mcpUrl: `${vaultUrl}/mcp`, launched, stop };
}

export interface Person {
  email: string;
  password: string;
  /** the session token, as `core login` holds one */
  token: string;
  orgId: string;
}

let people = 0;

/** Someone who signed up through IAM's API and set up an organization (so they hold its permissions). */
export async function personWithOrganization(iamUrl: string, label = "agent"): Promise<Person> {
  const email = `${label}-${Date.now().toString(36)}-${++people}@example.com`;
  const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    fetchRetrying(`${iamUrl}${path}`, { method: "POST", headers: { "content-type": "application/json", origin: iamUrl, ...headers }, body: JSON.stringify(body) });
  const signedUp = await post("/api/auth/sign-up/email", { email, password: PASSWORD, name: label });
  if (signedUp.status !== 200) throw new Error(`sign-up refused: ${signedUp.status} ${await signedUp.text()}`);
  const { token } = (await signedUp.json()) as { token: string };
  const cookie = (signedUp.headers.get("set-cookie") ?? "").split(";")[0]!;
  const slug = `${label}-${randomBytes(4).toString("hex")}`;
  const setup = await post("/api/core/org-setup", { name: `Org ${slug}`, slug }, { cookie });
  if (setup.status !== 201) throw new Error(`org-setup refused: ${setup.status} ${await setup.text()}`);
  const { orgId } = (await setup.json()) as { orgId: string };
  return { email, password: PASSWORD, token, orgId };
}

/** An API key of `person`, made through the auth library's own route. */
export async function apiKeyOf(iamUrl: string, person: Person): Promise<string> {
  const response = await fetchRetrying(`${iamUrl}/api/auth/api-key/create`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${person.token}`, origin: iamUrl },
    body: JSON.stringify({ name: "agent test" }),
  });
  if (response.status !== 200) throw new Error(`api key refused: ${response.status} ${await response.text()}`);
  return ((await response.json()) as { key: string }).key;
}

/**
 * What a native MCP client runs to receive the authorization answer (RFC 8252 §7.3): a server on a
 * loopback port that takes the first request to its callback path, answers the browser with a
 * short page and hands the query's `code` and `state` (or `error`) to the test.
 */
export class LoopbackCallback {
  private server?: Server;
  private settle!: (query: URLSearchParams) => void;
  /** the query of the redirect, once the browser has followed it */
  readonly received: Promise<URLSearchParams> = new Promise((resolve) => (this.settle = resolve));
  url = "";

  async listen(): Promise<this> {
    const port = await freePort();
    this.server = createServer((request, response) => {
      const at = new URL(request.url ?? "/", `http://127.0.0.1:${port}`);
      if (at.pathname !== "/callback") {
        response.writeHead(404).end();
        return;
      }
      response.writeHead(200, { "content-type": "text/html; charset=utf-8" }).end("<!doctype html><title>Signed in</title><h1>You can close this window</h1>");
      this.settle(at.searchParams);
    });
    await new Promise<void>((resolve) => this.server!.listen(port, "127.0.0.1", resolve));
    this.url = `http://127.0.0.1:${port}/callback`;
    return this;
  }

  async close(): Promise<void> {
    if (this.server) await new Promise((resolve) => this.server!.close(resolve));
  }
}

/**
 * The SDK's `OAuthClientProvider` as a native agent implements it, in memory: a public client
 * (no secret) registered dynamically with a loopback redirect, asking for refresh tokens. What the
 * SDK hands it is kept unchanged (its `issuer` included), as the SDK asks.
 */
export class MemoryOAuthClient implements OAuthClientProvider {
  private information?: OAuthClientInformationMixed;
  private stored?: OAuthTokens;
  private verifier?: string;
  private readonly expectedState = randomBytes(16).toString("base64url");
  private opened!: (url: URL) => void;
  /** the authorization URL the SDK asked to open in the user's browser */
  readonly authorizationUrl: Promise<URL> = new Promise((resolve) => (this.opened = resolve));
  /** every set of tokens the SDK saved, in order */
  readonly savedTokens: OAuthTokens[] = [];

  constructor(private readonly redirect: string, private readonly name = "Vault agent test") {}

  get redirectUrl(): string {
    return this.redirect;
  }

  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: this.name,
      redirect_uris: [this.redirect],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    };
  }

  state(): string {
    return this.expectedState;
  }

  clientInformation(): OAuthClientInformationMixed | undefined {
    return this.information;
  }

  saveClientInformation(information: OAuthClientInformationMixed): void {
    this.information = information;
  }

  tokens(): OAuthTokens | undefined {
    return this.stored;
  }

  saveTokens(tokens: OAuthTokens): void {
    this.stored = tokens;
    this.savedTokens.push(tokens);
  }

  redirectToAuthorization(authorizationUrl: URL): void {
    this.opened(authorizationUrl);
  }

  saveCodeVerifier(codeVerifier: string): void {
    this.verifier = codeVerifier;
  }

  codeVerifier(): string {
    if (!this.verifier) throw new Error("no PKCE verifier saved");
    return this.verifier;
  }

  /** Whether the `state` of a redirect is the one this client sent (RFC 6749 §10.12). */
  isOwnState(state: string | null): boolean {
    return state === this.expectedState;
  }

  /**
   * The stored access token replaced by one the vault cannot accept, as an expired one is after
   * its few minutes: the next call answers 401 and the SDK has to use the refresh token.
   */
  spoilAccessToken(): void {
    if (!this.stored) throw new Error("no tokens to spoil");
    this.stored = { ...this.stored, access_token: `${this.stored.access_token.slice(0, -8)}AAAAAAAA` };
  }
}

/** A JWT's header and payload, decoded without checking the signature (the vault checks it). */
export function decodeJwt(token: string): { header: Record<string, unknown>; payload: Record<string, unknown> } {
  const [header, payload] = token.split(".");
  const decode = (part: string | undefined) => JSON.parse(Buffer.from(part ?? "", "base64url").toString("utf8")) as Record<string, unknown>;
  return { header: decode(header), payload: decode(payload) };
}

/**
 * The user's part of the authorization, in a browser that has just opened the authorization URL:
 * IAM sends someone not signed in to its sign-in page, brings them back to the request, and asks
 * for consent; Allow sends the browser to the client's redirect URI with the code.
 */
export async function signInAndAllow(page: Page, person: Person): Promise<void> {
  await signIn(page, person);
  await page.getByRole("button", { name: "Allow", exact: true }).click();
}

/** IAM's sign-in page, filled in and sent: the browser then goes on to the consent page. */
export async function signIn(page: Page, person: Person): Promise<void> {
  await page.getByLabel("Email", { exact: true }).fill(person.email);
  await page.getByLabel("Password", { exact: true }).fill(person.password);
  await page.getByRole("button", { name: "Sign in", exact: true }).click();
}
