import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { randomBytes } from "node:crypto";
import { silentLogger, type ServiceName } from "@core/kit";
import { runServices, type ServiceModule } from "@core/launcher";
import * as billing from "../../services/billing/src/index.js";
import * as iam from "../../services/iam/src/index.js";
import * as platformRegistry from "../../services/platform-registry/src/index.js";
import * as stackRegistry from "../../services/stack-registry/src/index.js";
import * as vault from "../../services/vault/src/index.js";
import { freePort } from "../../services/iam/test/support/harness.js";

export const FUZZER_SERVICE = { id: "fuzzer", secret: "fuzzer-secret-0123456789abcdef" };
const PASSWORD = "correct-horse-battery";

export interface Credential {
  name: string;
  headers: Record<string, string>;
  /** what must never come back in an answer */
  secret: string | null;
}

/** Every service, started as `npm start` starts them (one process, each on its own port, over HTTP). */
export interface Platform {
  urls: Record<ServiceName, string>;
  credentials: () => Promise<Credential[]>;
  /** values for path parameters by name: ids the services know */
  known: Record<string, string[]>;
  stop(): Promise<void>;
}

async function json(response: Response) {
  const text = await response.text();
  if (!response.ok) throw new Error(`${response.url} answered ${response.status}: ${text}`);
  return text ? JSON.parse(text) : null;
}

/**
 * Starts IAM, billing (with its test clock), the stack registry, the platform registry and the vault through the launcher on
 * PGlite in a fresh data directory, or on a fresh PostgreSQL database when `databaseUrl` is given,
 * and seeds them: an operator, a tenant with a platform, a workspace stack, a template with a version,
 * an invitation, an API key, and a paid subscription with its customer, card and invoice.
 */
export async function startPlatform(databaseUrl?: string): Promise<Platform> {
  const dataDir = mkdtempSync(join(tmpdir(), "core-fuzz-"));
  let dropDatabase = async () => {};
  let url: string | undefined;
  if (databaseUrl) {
    const name = `core_fuzz_${randomBytes(6).toString("hex")}`;
    const admin = new pg.Client({ connectionString: databaseUrl });
    await admin.connect();
    await admin.query(`create database ${name}`);
    await admin.end();
    const target = new URL(databaseUrl);
    target.pathname = `/${name}`;
    url = target.toString();
    dropDatabase = async () => {
      const dropper = new pg.Client({ connectionString: databaseUrl });
      await dropper.connect();
      await dropper.query(`drop database if exists ${name} with (force)`);
      await dropper.end();
    };
  }
  // a port found free may be taken by another process before the services bind it: then, new ports
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnFreePorts(dataDir, url, dropDatabase);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EADDRINUSE" || attempt === 3) {
        await dropDatabase();
        rmSync(dataDir, { recursive: true, force: true });
        throw err;
      }
    }
  }
}

async function startOnFreePorts(dataDir: string, url: string | undefined, dropDatabase: () => Promise<void>): Promise<Platform> {
  const ports = { iam: await freePort(), billing: await freePort(), "stack-registry": await freePort(), "platform-registry": await freePort(), vault: await freePort() };
  const urls = {
    iam: `http://127.0.0.1:${ports.iam}`,
    billing: `http://127.0.0.1:${ports.billing}`,
    "stack-registry": `http://127.0.0.1:${ports["stack-registry"]}`,
    "platform-registry": `http://127.0.0.1:${ports["platform-registry"]}`,
    vault: `http://127.0.0.1:${ports.vault}`,
  };
  const env: NodeJS.ProcessEnv = {
    CORE_DATA_DIR: dataDir,
    ...(url ? { DATABASE_URL: url } : {}),
    CORE_IAM_PORT: String(ports.iam),
    CORE_IAM_URL: urls.iam,
    CORE_BILLING_PORT: String(ports.billing),
    CORE_BILLING_URL: urls.billing,
    CORE_BILLING_TEST_CLOCK: "1",
    CORE_STACK_REGISTRY_PORT: String(ports["stack-registry"]),
    CORE_STACK_REGISTRY_URL: urls["stack-registry"],
    CORE_PLATFORM_REGISTRY_PORT: String(ports["platform-registry"]),
    CORE_PLATFORM_REGISTRY_URL: urls["platform-registry"],
    CORE_VAULT_PORT: String(ports.vault),
    CORE_VAULT_URL: urls.vault,
    // limits have their own tests; here they would only hide the inputs behind 429s
    CORE_RATE_LIMIT: "off",
    CORE_SERVICE_CREDENTIALS: `${FUZZER_SERVICE.id}:${FUZZER_SERVICE.secret}`,
  };
  const modules: [ServiceName, ServiceModule][] = [
    ["iam", iam],
    ["billing", billing],
    ["stack-registry", stackRegistry],
    ["platform-registry", platformRegistry],
    ["vault", vault],
  ];
  const running = await runServices({ services: modules, builtInCredentials: true, env }, silentLogger());
  const stop = async () => {
    await running.stop();
    await dropDatabase();
    rmSync(dataDir, { recursive: true, force: true });
  };
  try {
    return await seeded(urls, stop);
  } catch (err) {
    await stop();
    throw err;
  }
}

async function seeded(urls: Platform["urls"], stop: () => Promise<void>): Promise<Platform> {
  const post = (base: string, path: string, body: unknown, headers: Record<string, string> = {}) =>
    fetch(`${base}${path}`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) });
  const signUp = async (email: string) => {
    const response = await post(urls.iam, "/api/auth/sign-up/email", { email, password: PASSWORD, name: email.split("@")[0] });
    const body = await json(response);
    return { token: body.token as string, userId: body.user.id as string, email, cookie: (response.headers.get("set-cookie") ?? "").split(";")[0]! };
  };
  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

  const operator = await signUp("operator@fuzz.example");
  await json(await post(urls.iam, "/api/core/bootstrap", {}, bearer(operator.token)));
  const owner = await signUp("owner@fuzz.example");
  const setup = await json(await post(urls.iam, "/api/core/org-setup", { name: "Fuzz", slug: "fuzz" }, { cookie: owner.cookie, origin: urls.iam }));
  const key = await json(await post(urls.iam, "/api/auth/api-key/create", { name: "fuzz" }, bearer(owner.token)));
  const invitation = await json(await post(urls.iam, `/api/core/organizations/${setup.orgId}/invitations`, { email: "invitee@fuzz.example" }, bearer(owner.token)));
  const stack = await json(await post(urls["platform-registry"], `/platforms/${setup.platformId}/stacks`, { tenantId: "tenant-1", name: "web" }, bearer(owner.token)));
  await json(await post(urls["stack-registry"], "/api/v1/stacks", { name: "web-app", displayName: "Web app", description: "A web app" }, bearer(operator.token)));
  await json(await post(urls["stack-registry"], "/api/v1/stacks/web-app/versions", { version: "1.0.0", stackDefinition: { services: ["web"] }, coreSdkVersion: "1.0.0" }, bearer(operator.token)));
  const grant = await json(
    await post(urls.iam, "/api/core/grants", { userId: owner.userId, orgId: setup.orgId, permission: "members:invite", granted: true, grantedBy: owner.userId }, bearer(owner.token)),
  );
  const events = await json(await fetch(`${urls.iam}/api/audit/events?limit=1`, { headers: bearer(operator.token) }));
  const paid = await json(
    await post(urls.billing, "/api/billing/upgrade", { planId: "plan_starter", paymentMethodId: "pm_card_visa", billingEmail: "owner@fuzz.example", idempotencyKey: crypto.randomUUID() }, bearer(owner.token)),
  );
  const card = await json(await fetch(`${urls.billing}/payment-methods`, { headers: bearer(owner.token) }));

  const serviceToken = async (target: string) => {
    const basic = Buffer.from(`${FUZZER_SERVICE.id}:${FUZZER_SERVICE.secret}`).toString("base64");
    return (await json(await post(urls.iam, "/api/core/service-token", { serviceId: FUZZER_SERVICE.id, targetService: target }, { authorization: `Basic ${basic}` }))).token as string;
  };

  /** A session that still works: the fuzzer may sign out or revoke the one it was given. */
  const live = async (person: { email: string; token: string }) => {
    const check = await fetch(`${urls.iam}/api/core/session`, { headers: bearer(person.token) });
    await check.body?.cancel();
    if (check.status === 200) return person.token;
    const signedIn = await json(await post(urls.iam, "/api/auth/sign-in/email", { email: person.email, password: PASSWORD }));
    person.token = signedIn.token;
    return person.token;
  };

  const credentials = async (): Promise<Credential[]> => {
    const [operatorToken, ownerToken] = [await live(operator), await live(owner)];
    const tokens = await Promise.all(["iam", "billing", "stack-registry", "platform-registry"].map(serviceToken));
    return [
      { name: "none", headers: {}, secret: null },
      { name: "operator session", headers: bearer(operatorToken), secret: operatorToken },
      { name: "tenant owner session", headers: bearer(ownerToken), secret: ownerToken },
      { name: "tenant owner session cookie", headers: { cookie: owner.cookie, origin: urls.iam }, secret: owner.cookie.split("=")[1]! },
      { name: "tenant API key", headers: { "x-api-key": key.key }, secret: key.key },
      ...tokens.map((token, i) => ({ name: `service token #${i}`, headers: bearer(token), secret: token })),
      { name: "unknown session", headers: bearer("no-such-session-token"), secret: null },
      { name: "over-long bearer", headers: bearer("b".repeat(1024)), secret: null },
      { name: "over-long API key", headers: { "x-api-key": `core_${"k".repeat(2000)}` }, secret: null },
      { name: "malformed authorization", headers: { authorization: "Bearer" }, secret: null },
      { name: "forged JWT", headers: bearer("eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJpYW0ifQ.c2ln"), secret: null },
    ];
  };

  return {
    urls,
    credentials,
    known: {
      orgId: [setup.orgId],
      platformId: [setup.platformId],
      stackId: [stack.id],
      slug: ["fuzz"],
      name: ["web-app"],
      version: ["1.0.0"],
      invitationId: [invitation.id],
      role: ["owner", "admin", "member"],
      id: [grant.id, events.data[0]?.id, setup.platformId, invitation.id, paid.subscription.id, paid.subscription.customerId, paid.invoice.id, card.data[0].id].filter(Boolean),
      token: ["no-such-token"],
    },
    stop,
  };
}
