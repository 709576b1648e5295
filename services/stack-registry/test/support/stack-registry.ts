import { expect } from "vitest";
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

export interface StackTemplate {
  id: string;
  name: string;
  display_name: string;
  description: string;
  icon: string;
  domain: string;
  latest_version: string;
  status: string;
  created_at: number;
  updated_at: number;
}

export interface StackVersion {
  id: string;
  template_id: string;
  version: string;
  stack_definition: string;
  core_sdk_version: string;
  status: string;
  published_at: number;
  created_at: number;
}

export const unique = (prefix = "t") => `${prefix}-${randomBytes(5).toString("hex")}`;

/** 2026-03-01T12:00:00Z in Unix seconds: where the test clock starts */
export const START_SECONDS = Date.parse("2026-03-01T12:00:00.000Z") / 1000;

/**
 * The stack registry as it runs: the real app on a real database with its migrations, its
 * credentials resolved by the real remote resolvers against a fake IAM over HTTP.
 */
export async function startStackRegistry(database: TestDatabase) {
  const handle: DatabaseHandle = await database.open();
  await applyMigrations(handle.db, SERVICE_ID, migrationsFolder);
  const iam: FakeIam = await startFakeIam();
  iam.serviceSecrets.set(SERVICE_ID, "stack-registry-secret");
  const clock = manualClock(new Date(START_SECONDS * 1000));
  const tokens = new ServiceTokenClient(iam.url, { serviceId: SERVICE_ID, secret: "stack-registry-secret" });
  const credentials = remoteResolvers({ iamUrl: iam.url, serviceId: SERVICE_ID, tokens });
  const app = createApp({ db: handle.db, logger: silentLogger(), credentials, clock });

  const sessionOf = (who: Principal): Headers => {
    const token = unique("session");
    iam.sessions.set(token, who);
    return { authorization: `Bearer ${token}` };
  };

  const as = {
    /** another service with a service token for the stack registry */
    service: async (serviceId = "platform-registry"): Promise<Headers> => ({
      authorization: `Bearer ${await iam.mintServiceToken({ sub: serviceId, aud: SERVICE_ID })}`,
    }),
    /** a member of the core-operator organization; publishers hold stacks:publish */
    operator: (permissions: string[] = ["stacks:publish"]): Headers =>
      sessionOf(principal({ orgType: "core-operator", orgId: "org_core", platformId: null, role: "admin", permissions })),
    /** a member of a tenant organization */
    member: (permissions: string[] = ["platform:read", "platform:write"]): Headers =>
      sessionOf(principal({ orgType: "tenant", permissions })),
    /** an API key of a tenant member */
    apiKey: (permissions: string[] = ["platform:read"]): Headers => {
      const key = unique("key");
      iam.apiKeys.set(key, principal({ type: "apikey", apiKeyId: unique("key"), sessionId: null, permissions }));
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

  const publisher = as.operator();

  /** creates a template as an operator with stacks:publish */
  async function createTemplate(input: Partial<{ name: string; displayName: string; description: string; icon: string; domain: string }> = {}) {
    const name = input.name ?? unique("tpl");
    const res = await call<{ id: string }>("POST", "/api/v1/stacks", {
      headers: publisher,
      body: { name, displayName: "A stack", description: "What it is for", ...input },
    });
    if (res.status !== 201) throw new Error(`creating a template answered ${res.status}: ${JSON.stringify(res.body)}`);
    return { id: res.body.id, name };
  }

  /** publishes a version as an operator with stacks:publish */
  function publish(name: string, version: string, input: Partial<{ stackDefinition: unknown; coreSdkVersion: string }> = {}) {
    return call<{ id: string }>("POST", `/api/v1/stacks/${name}/versions`, {
      headers: publisher,
      body: { version, stackDefinition: { services: ["web"] }, coreSdkVersion: "1.0.0", ...input },
    });
  }

  async function published(name: string, version: string) {
    const res = await publish(name, version);
    if (res.status !== 201) throw new Error(`publishing ${name}@${version} answered ${res.status}: ${JSON.stringify(res.body)}`);
    return res.body;
  }

  return {
    app,
    iam,
    clock,
    handle,
    db: handle.db,
    as,
    publisher,
    call,
    createTemplate,
    publish,
    published,
    close: async () => {
      await iam.close();
      await handle.close();
    },
  };
}

export type StackRegistry = Awaited<ReturnType<typeof startStackRegistry>>;

/** An error answer: the status, the code, and the envelope of spec §2.3 with `details` always present. */
export function expectError(res: Answer, status: number, code: string) {
  expect({ status: res.status, code: res.body?.error?.code }).toEqual({ status, code });
  expect(Object.keys(res.body.error).sort()).toEqual(["code", "details", "message", "requestId"]);
  expect(typeof res.body.error.message).toBe("string");
  expect(typeof res.body.error.requestId).toBe("string");
  return res.body.error as { code: string; message: string; requestId: string; details: any };
}
