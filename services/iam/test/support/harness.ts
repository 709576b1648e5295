import { readFileSync } from "node:fs";
import { request as undiciRequest } from "undici";
import { createServer } from "node:net";
import { applyMigrations, type DatabaseHandle } from "@core/storage";
import { listen, manualClock, silentLogger, unixSeconds, type RunningServer } from "@core/kit";
import { remoteResolvers, ServiceTokenClient, type Principal } from "@core/service-auth";
import { createApp as createRegistryApp, } from "../../../platform-registry/src/app.js";
import { migrationsFolder as registryMigrations } from "../../../platform-registry/src/index.js";
import { createApp, type IamApp } from "../../src/app.js";
import { ensureVaultResource } from "../../src/oauth-provider.js";
import type { IamConfig } from "../../src/config.js";
import { migrationsFolder } from "../../src/index.js";
import type { Logger, Mail, Mailer } from "@core/kit";

export const TEST_SECRET = "test-secret-that-is-long-enough-for-better-auth-0123456789";
export const REGISTRY_SECRET = "registry-secret-for-tests-0123456789";

/**
 * Where tests take ports: below the kernel's ephemeral range. A port found free there stays free
 * until the test's server binds it; in the ephemeral range (where port 0 draws from) any outgoing
 * connection or another test's listen could take it in between: CI saw EADDRINUSE so, from a
 * launcher started on ports found free a moment before.
 */
export function testPortRange(): { low: number; high: number } {
  try {
    const [ephemeralLow] = readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/).map(Number);
    if (ephemeralLow && ephemeralLow > 12_000) return { low: 10_000, high: ephemeralLow - 1 };
  } catch {
    // not Linux: below the common default range
  }
  return { low: 10_000, high: 32_767 };
}

/** Whether nothing listens on 127.0.0.1:`port` now. */
export function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
  });
}

/** A port free on 127.0.0.1 now, from the tests' range (testPortRange). */
export async function freePort(): Promise<number> {
  const { low, high } = testPortRange();
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = low + Math.floor(Math.random() * (high - low + 1));
    if (await portIsFree(port)) return port;
  }
  throw new Error(`no free port between ${low} and ${high}`);
}

/** Config overrides for tests; rate limits may be given in part. */
export type ConfigOverrides = Partial<Omit<IamConfig, "rateLimits">> & { rateLimits?: Partial<IamConfig["rateLimits"]> };

export function testConfig(overrides: ConfigOverrides = {}): IamConfig {
  return {
    iamUrl: "http://localhost:4100",
    registryUrl: "http://127.0.0.1:1",
    authSecret: TEST_SECRET,
    trustedOrigins: ["http://localhost:4100"],
    returnOrigins: ["http://localhost:4100", "http://localhost:4200"],
    secureCookies: false,
    sessionSeconds: 3600,
    orgSetupRecoveryMs: 60_000,
    invitationSeconds: 7 * 86400,
    bootstrapToken: undefined,
    // as on the embedded database: providers on loopback (the tests' own) are allowed, and no list narrows them
    ssoProviders: { origins: null, allowPrivate: true, timeoutMs: 5000 },
    activationUrl: `${overrides.iamUrl ?? "http://localhost:4100"}/device`,
    deviceCodeSeconds: 600,
    deviceIntervalSeconds: 5,
    accessTokenSeconds: 3600,
    refreshTokenSeconds: 30 * 86400,
    smtpUrl: undefined,
    mailFrom: "Core <no-reply@localhost>",
    outboxDir: "/nonexistent",
    auditWebhookAllowPrivate: true,
    vaultResource: "http://localhost:4500/mcp",
    oauthAccessTokenSeconds: 600,
    clientMetadata: { enabled: true, timeoutMs: 5000, allowPrivate: false },
    ...overrides,
    rateLimits: {
      enabled: false,
      windowSeconds: 60,
      signIn: 10,
      signUp: 5,
      magicLink: 5,
      apiKeyFailures: 30,
      userCodeFailures: 10,
      passkey: 20,
      ssoStart: 10,
      twoFactor: 5,
      clientRegistration: 10,
      ...overrides.rateLimits,
    },
  };
}

/** A mailer that keeps what it sends, for tests that follow links. */
export function memoryMailer(): Mailer & { sent: Mail[] } {
  const sent: Mail[] = [];
  return { sent, send: async (mail) => void sent.push(mail) };
}

export interface Iam {
  app: IamApp;
  mailer: ReturnType<typeof memoryMailer>;
  clock: ReturnType<typeof manualClock>;
  config: IamConfig;
  origin: string;
}

/**
 * IAM in process on a migrated database. `registryFetch` stands in for the network to the
 * platform registry (a failing one, to prove org-setup's rollback).
 */
export async function createIam(
  database: DatabaseHandle,
  options: { config?: ConfigOverrides; fetch?: typeof fetch; serviceCredentials?: Map<string, string>; logger?: Logger } = {},
): Promise<Iam> {
  await applyMigrations(database.db, "iam", migrationsFolder);
  const config = testConfig(options.config);
  const mailer = memoryMailer();
  const clock = manualClock(new Date());
  await ensureVaultResource(database.db, config, clock.now());
  const app = createApp({
    db: database.db,
    logger: options.logger ?? silentLogger(),
    config,
    serviceCredentials: options.serviceCredentials ?? new Map([["platform-registry", REGISTRY_SECRET]]),
    mailer,
    clock,
    fetch: options.fetch,
  });
  return { app, mailer, clock, config, origin: new URL(config.iamUrl).origin };
}

export interface SignedUp {
  userId: string;
  email: string;
  token: string;
  /** `Cookie` header value carrying the signed session cookie */
  cookie: string;
}

let counter = 0;
export const uniqueEmail = (label = "user") => `${label}-${Date.now().toString(36)}-${++counter}@example.com`;
export const uniqueSlug = (label = "org") => `${label}-${Date.now().toString(36)}-${++counter}`;

export const PASSWORD = "correct-horse-battery";

/** Signs a new user up through better-auth's own route. */
export async function signUp(iam: Iam, email = uniqueEmail(), password = PASSWORD): Promise<SignedUp> {
  const response = await iam.app.request("/api/auth/sign-up/email", {
    method: "POST",
    headers: { "content-type": "application/json", origin: iam.origin },
    body: JSON.stringify({ email, password, name: email.split("@")[0] }),
  });
  if (response.status !== 200) throw new Error(`sign-up failed: ${response.status} ${await response.text()}`);
  const body = (await response.json()) as { token: string; user: { id: string } };
  const setCookie = response.headers.get("set-cookie") ?? "";
  const cookie = setCookie.split(";")[0]!;
  return { userId: body.user.id, email, token: body.token, cookie };
}

/** JSON request helper: `call(iam, "POST", path, { body, token | cookie | headers })`. */
export async function call(
  iam: Iam,
  method: string,
  path: string,
  options: { body?: unknown; token?: string; cookie?: string; headers?: Record<string, string> } = {},
) {
  const headers: Record<string, string> = { ...(options.headers ?? {}) };
  if (options.body !== undefined) headers["content-type"] ??= "application/json";
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  if (options.cookie) {
    headers.cookie = options.cookie;
    headers.origin ??= iam.origin;
  }
  const response = await iam.app.request(path, {
    method,
    headers,
    body: options.body === undefined ? undefined : typeof options.body === "string" ? options.body : JSON.stringify(options.body),
  });
  const text = await response.text();
  let json: any = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = text;
  }
  return { status: response.status, body: json, headers: response.headers };
}

/** A service token for `serviceId` → `target`, minted through the real route. */
export async function serviceToken(iam: Iam, serviceId = "platform-registry", secret = REGISTRY_SECRET, target = "iam") {
  const basic = Buffer.from(`${serviceId}:${secret}`).toString("base64");
  const r = await call(iam, "POST", "/api/core/service-token", {
    body: { serviceId, targetService: target },
    headers: { authorization: `Basic ${basic}` },
  });
  if (r.status !== 200) throw new Error(`service token refused: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body.token as string;
}

/**
 * IAM listening on loopback, its `app.request` sent over real HTTP (fetch, redirects returned rather
 * than followed): every helper here (call, PageBrowser, oauth) then talks to it as a client would.
 */
export async function iamOverHttp(database: DatabaseHandle, options: Parameters<typeof createIam>[1] = {}): Promise<Iam & { close(): Promise<void> }> {
  const port = await freePort();
  const iamUrl = `http://127.0.0.1:${port}`;
  const iam = await createIam(database, { ...options, config: { iamUrl, trustedOrigins: [iamUrl], returnOrigins: [iamUrl], ...options.config } });
  const server = await listen(iam.app, port, "127.0.0.1");
  const request = async (path: string, init: RequestInit = {}) => {
    // undici's request sends the headers as given (fetch adds its own fetch metadata, as a script's would)
    const answer = await undiciRequest(new URL(path, iamUrl), { method: (init.method ?? "GET") as "GET", headers: init.headers as Record<string, string>, body: init.body as string | undefined });
    const headers = new Headers();
    for (const [name, value] of Object.entries(answer.headers)) for (const one of [value ?? []].flat()) headers.append(name, one);
    const body = [204, 304].includes(answer.statusCode) ? null : Buffer.from(await answer.body.arrayBuffer());
    return new Response(body, { status: answer.statusCode, headers });
  };
  const app = new Proxy(iam.app, { get: (target, name) => (name === "request" ? request : Reflect.get(target, name)) });
  return { ...iam, app, close: () => server.close() };
}

/** IAM over real HTTP with a bootstrapped operator and a service token: the start of the security suites. */
export async function iamOverHttpWithOperator(open: () => Promise<DatabaseHandle>) {
  const database = await open();
  const iam = await iamOverHttp(database);
  const op = await operator(iam);
  const service = await serviceToken(iam);
  return {
    database,
    iam,
    op,
    service,
    close: async () => {
      await iam.close();
      await database.close();
    },
  };
}

/** Signs up a user and bootstraps the operator organization with them (owner). */
export async function operator(iam: Iam): Promise<SignedUp & { orgId: string }> {
  const person = await signUp(iam, uniqueEmail("operator"));
  const r = await call(iam, "POST", "/api/core/bootstrap", { token: person.token });
  if (r.status !== 201) throw new Error(`bootstrap failed: ${r.status} ${JSON.stringify(r.body)}`);
  return { ...person, orgId: r.body.orgId };
}

/**
 * IAM and the platform registry both listening on loopback, wired to each other as in
 * `npm start`: org-setup reaches the registry over HTTP with a service token, and the registry
 * checks credentials with IAM.
 */
export async function startIamAndRegistry(database: DatabaseHandle, config: ConfigOverrides = {}) {
  const [iamPort, registryPort] = [await freePort(), await freePort()];
  const iamUrl = `http://127.0.0.1:${iamPort}`;
  const registryUrl = `http://127.0.0.1:${registryPort}`;
  const iam = await createIam(database, { config: { iamUrl, registryUrl, trustedOrigins: [iamUrl], ...config } });
  await applyMigrations(database.db, "platform-registry", registryMigrations);
  const tokens = new ServiceTokenClient(iamUrl, { serviceId: "platform-registry", secret: REGISTRY_SECRET });
  const registry = createRegistryApp({
    db: database.db,
    logger: silentLogger(),
    credentials: remoteResolvers({ iamUrl, serviceId: "platform-registry", tokens }),
  });
  const servers: RunningServer[] = [await listen(iam.app, iamPort, "127.0.0.1"), await listen(registry, registryPort, "127.0.0.1")];
  return {
    iam,
    registry,
    iamUrl,
    registryUrl,
    close: async () => {
      for (const s of servers) await s.close();
    },
  };
}

/** Creates an API key through better-auth's own route, with the owner's session; the raw key is shown only here. */
export async function createApiKey(iam: Iam, owner: { token: string }, body: Record<string, unknown> = { name: "ci" }) {
  const r = await call(iam, "POST", "/api/auth/api-key/create", { token: owner.token, headers: { origin: iam.origin }, body });
  if (r.status !== 200) throw new Error(`api key refused: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body as { id: string; key: string; start: string };
}

/** The cookies a response set, as a `Cookie` header (cleared ones left out). */
export const cookiesOf = (headers: Headers) =>
  headers
    .getSetCookie()
    .filter((c) => !/max-age=0/i.test(c))
    .map((c) => c.split(";")[0]!)
    .filter((pair) => !pair.endsWith("="))
    .join("; ");

/** The session token and `Cookie` value of a `set-cookie` answer from better-auth. */
export function sessionCookieOf(response: { headers: Headers }): string {
  return (response.headers.get("set-cookie") ?? "").split(";")[0]!;
}

/** Signs an existing user in again (a second session) through better-auth's own route. */
export async function signIn(iam: Iam, person: { userId: string; email: string }, password = PASSWORD): Promise<SignedUp> {
  const r = await call(iam, "POST", "/api/auth/sign-in/email", { headers: { origin: iam.origin }, body: { email: person.email, password } });
  if (r.status !== 200) throw new Error(`sign-in failed: ${r.status} ${JSON.stringify(r.body)}`);
  return { userId: person.userId, email: person.email, token: r.body.token, cookie: sessionCookieOf(r) };
}

/** The app's current time in Unix seconds (the harness clock drives IAM). */
export const nowSeconds = (iam: Iam) => unixSeconds(iam.clock.now());

/** The caller's principal, as `GET /api/core/session` answers it. */
export async function principalOf(iam: Iam, person: { token: string }) {
  const r = await call(iam, "GET", "/api/core/session", { token: person.token });
  if (r.status !== 200) throw new Error(`session refused: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body.principal as Principal;
}

/** The id of a session, as `GET /api/core/session` answers it. */
export const sessionIdOf = async (iam: Iam, person: { token: string }) => (await call(iam, "GET", "/api/core/session", { token: person.token })).body.session.id as string;

/** Makes `person`'s session act in `organizationId`, through the library's set-active. */
export const setActive = (iam: Iam, person: { token: string }, organizationId: string) =>
  call(iam, "POST", "/api/auth/organization/set-active", { token: person.token, body: { organizationId } });

/** A tenant organization created by the operator, with a newly signed-up owner (or `owner`). */
export async function tenantOrg(iam: Iam, by: { token: string }, owner?: SignedUp) {
  const person = owner ?? (await signUp(iam, uniqueEmail("owner")));
  const slug = uniqueSlug("tenant");
  const r = await call(iam, "POST", "/api/core/organizations", { token: by.token, body: { name: `Tenant ${slug}`, slug, ownerId: person.userId } });
  if (r.status !== 201) throw new Error(`organization refused: ${r.status} ${JSON.stringify(r.body)}`);
  return { orgId: r.body.id as string, slug, owner: person };
}

/** A new user who joins `orgId` with `role`: invited by `inviter`, accepted through better-auth. */
export async function joinOrg(iam: Iam, orgId: string, inviter: { token: string }, role: "owner" | "admin" | "member" = "member"): Promise<SignedUp> {
  const person = await signUp(iam, uniqueEmail(role));
  const invited = await call(iam, "POST", `/api/core/organizations/${orgId}/invitations`, { token: inviter.token, body: { email: person.email, role } });
  if (invited.status !== 201) throw new Error(`invitation refused: ${invited.status} ${JSON.stringify(invited.body)}`);
  const accepted = await call(iam, "POST", "/api/auth/organization/accept-invitation", {
    token: person.token,
    headers: { origin: iam.origin },
    body: { invitationId: invited.body.id },
  });
  if (accepted.status !== 200) throw new Error(`accepting refused: ${accepted.status} ${JSON.stringify(accepted.body)}`);
  return person;
}

/** A tenant organization with an owner, an admin and a plain member. */
export async function staffedOrg(iam: Iam, by: { token: string }) {
  const org = await tenantOrg(iam, by);
  const admin = await joinOrg(iam, org.orgId, org.owner, "admin");
  const member = await joinOrg(iam, org.orgId, org.owner, "member");
  return { ...org, admin, member };
}

/** The paths named in a 400 VALIDATION_ERROR answer's details. */
export const failingFields = (body: { error: { details: { path: string }[] } }) => body.error.details.map((d) => d.path);

export type Operator = Awaited<ReturnType<typeof operator>>;

/** A database and IAM on it: the start of most IAM suites. */
export async function iamOn(open: () => Promise<DatabaseHandle>, options: Parameters<typeof createIam>[1] = {}) {
  const database = await open();
  return { database, iam: await createIam(database, options) };
}

/** The usual start of an IAM suite: a database, IAM on it, a bootstrapped operator and a service token. */
export async function iamWithOperator(open: () => Promise<DatabaseHandle>, options: Parameters<typeof createIam>[1] = {}) {
  const database = await open();
  const iam = await createIam(database, options);
  const op = await operator(iam);
  const service = await serviceToken(iam);
  return { database, iam, op, service };
}
