import { randomBytes } from "node:crypto";
import { manualClock, silentLogger } from "@core/kit";
import { remoteResolvers, ServiceTokenClient, type Principal } from "@core/service-auth";
import { applyMigrations, type DatabaseHandle, type TestDatabase } from "@core/storage";
import { createApp } from "../../src/app.js";
import { migrationsFolder, SERVICE_ID } from "../../src/index.js";
import { principal, startFakeIam, type FakeIam } from "../../../../packages/service-auth/test/support/fake-iam.js";

export type Headers = Record<string, string>;

export interface Answer<T = any> {
  status: number;
  body: T;
}

export interface Platform {
  id: string;
  name: string;
  slug: string;
  status: string;
  tier: string;
  hostAccountId: string | null;
  repoName: string | null;
  createdAt: string;
  updatedAt: string;
}

export interface Stack {
  id: string;
  tenantId: string;
  platformId: string;
  name: string;
  isDefault: boolean;
  templateId: string | null;
  repoName: string | null;
  status: string;
  createdAt: string;
  updatedAt: string;
}

export const unique = (prefix = "x") => `${prefix}-${randomBytes(5).toString("hex")}`;

/**
 * The platform registry as it runs: the real app on a real database with its migrations, its
 * credentials resolved by the real remote resolvers against a fake IAM over HTTP.
 */
export async function startRegistry(database: TestDatabase) {
  const handle: DatabaseHandle = await database.open();
  await applyMigrations(handle.db, SERVICE_ID, migrationsFolder);
  const iam: FakeIam = await startFakeIam();
  iam.serviceSecrets.set(SERVICE_ID, "registry-secret");
  const clock = manualClock(new Date("2026-03-01T12:00:00.000Z"));
  const tokens = new ServiceTokenClient(iam.url, { serviceId: SERVICE_ID, secret: "registry-secret" });
  const credentials = remoteResolvers({ iamUrl: iam.url, serviceId: SERVICE_ID, tokens });
  const app = createApp({ db: handle.db, logger: silentLogger(), credentials, clock });

  /** a session of IAM standing for this principal */
  const sessionOf = (who: Principal): Headers => {
    const token = unique("session");
    iam.sessions.set(token, who);
    return { authorization: `Bearer ${token}` };
  };

  const as = {
    /** another service (IAM's org-setup, billing …) with a service token for the registry */
    service: async (serviceId = "iam"): Promise<Headers> => ({
      authorization: `Bearer ${await iam.mintServiceToken({ sub: serviceId, aud: SERVICE_ID })}`,
    }),
    /** a member of the tenant organization owning `platformId` */
    member: (platformId: string, permissions: string[], overrides: Partial<Principal> = {}): Headers =>
      sessionOf(principal({ orgType: "tenant", orgId: `org-of-${platformId}`, platformId, permissions, ...overrides })),
    /** a member of the core-operator organization */
    operator: (permissions: string[] = ["platforms:manage", "platform:read"]): Headers =>
      sessionOf(principal({ orgType: "core-operator", orgId: "org_core", platformId: null, role: "admin", permissions })),
    /** an API key of a tenant member */
    apiKey: (platformId: string, permissions: string[]): Headers => {
      const key = unique("key");
      iam.apiKeys.set(key, principal({ type: "apikey", apiKeyId: unique("key"), sessionId: null, platformId, orgId: `org-of-${platformId}`, permissions }));
      return { "x-api-key": key };
    },
  };

  async function call<T = any>(method: string, path: string, options: { headers?: Headers; body?: unknown } = {}): Promise<Answer<T>> {
    const headers: Headers = { ...options.headers };
    if (options.body !== undefined) headers["content-type"] = "application/json";
    const res = await app.request(path, {
      method,
      headers,
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : null };
  }

  /** creates a platform as a service, one millisecond after the previous one */
  async function createPlatform(input: Partial<{ name: string; slug: string; tier: string; hostAccountId: string; repoName: string }> = {}) {
    clock.advance(1);
    const res = await call<Platform>("POST", "/platforms", {
      headers: await as.service(),
      body: { name: "Acme", slug: unique("acme"), tier: "starter", ...input },
    });
    if (res.status !== 201) throw new Error(`creating a platform answered ${res.status}: ${JSON.stringify(res.body)}`);
    return res.body;
  }

  /** creates a stack as a service, one millisecond after the previous one */
  async function createStack(platformId: string, input: Partial<{ tenantId: string; name: string; isDefault: boolean; templateId: string; repoName: string }> = {}) {
    clock.advance(1);
    const res = await call<{ id: string; name: string; status: string; isDefault: boolean; createdAt: string }>(
      "POST",
      `/platforms/${platformId}/stacks`,
      { headers: await as.service(), body: { tenantId: "tnt_1", name: unique("stack"), ...input } },
    );
    if (res.status !== 201) throw new Error(`creating a stack answered ${res.status}: ${JSON.stringify(res.body)}`);
    return res.body;
  }

  /** every page of a list, following cursors */
  async function allPages<T>(path: string, headers: Headers, limit: number): Promise<{ pages: T[][]; cursors: (string | null)[] }> {
    const pages: T[][] = [];
    const cursors: (string | null)[] = [];
    let cursor: string | null = null;
    do {
      const query: string = `?limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`;
      const res: Answer<{ data: T[]; cursor: string | null }> = await call("GET", `${path}${query}`, { headers });
      if (res.status !== 200) throw new Error(`listing ${path} answered ${res.status}: ${JSON.stringify(res.body)}`);
      pages.push(res.body.data);
      cursors.push(res.body.cursor);
      cursor = res.body.cursor;
    } while (cursor && pages.length < 1000);
    return { pages, cursors };
  }

  return {
    app,
    iam,
    clock,
    handle,
    db: handle.db,
    as,
    call,
    createPlatform,
    createStack,
    allPages,
    close: async () => {
      await iam.close();
      await handle.close();
    },
  };
}

export type Registry = Awaited<ReturnType<typeof startRegistry>>;

/** ISO 8601 as `Date.prototype.toISOString` writes it */
export const ISO_8601 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
