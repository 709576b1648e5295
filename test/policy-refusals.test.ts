import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listen, silentLogger, type RunningServer } from "@core/kit";
import { iamKeySet, remoteResolvers, ServiceTokenClient } from "@core/service-auth";
import { applyMigrations, testDatabases, type DatabaseHandle } from "@core/storage";
import { createApp as createBillingApp } from "../services/billing/src/app.js";
import { migrationsFolder as billingMigrations } from "../services/billing/src/index.js";
import { testBillingConfig } from "../services/billing/test/support/billing.js";
import { createApp as createPlatformRegistryApp } from "../services/platform-registry/src/app.js";
import { migrationsFolder as platformRegistryMigrations } from "../services/platform-registry/src/index.js";
import { createApp as createStackRegistryApp } from "../services/stack-registry/src/app.js";
import { migrationsFolder as stackRegistryMigrations } from "../services/stack-registry/src/index.js";
import { VaultAccess } from "../services/vault/src/access.js";
import { makeTestVault, startVaultServer, type TestVault, type VaultServer } from "../services/vault/test/support/vault-server.js";
import { call, createIam, freePort, signUp, uniqueSlug, type Iam, type SignedUp } from "../services/iam/test/support/harness.js";
import { heldBackMember } from "../services/iam/test/support/policy.js";

const SECRETS = { "platform-registry": "registry-secret-for-policy-tests-0123", billing: "billing-secret-for-policy-tests-01234", "stack-registry": "stacks-secret-for-policy-tests-012345", vault: "vault-secret-for-policy-tests-0123456" };
const TWO_FACTOR_MESSAGE = "Your organization requires two-factor authentication: set it up, or sign in again with your code";

/**
 * A member held back by an organization's two-factor policy (docs/vault/concepts/second-factors-and-policy.md)
 * calls every resource service with their session token, over real HTTP: the real IAM answers each
 * service's `/api/validate-session` with the restricted principal, and each service refuses with
 * 403 FORBIDDEN naming the policy and the IAM page that resolves it, never "in no organization".
 */
describe.each(testDatabases())("what each service answers a member held back by a policy on $name", ({ open }) => {
  let database: DatabaseHandle;
  let iam: Iam;
  let servers: RunningServer[] = [];
  let vaultDir: TestVault;
  let vault: VaultServer;
  const urls = { iam: "", "platform-registry": "", billing: "", "stack-registry": "" };
  let orgId: string;
  let platformId: string;
  let member: SignedUp;
  let owner: SignedUp;

  beforeAll(async () => {
    database = await open();
    const ports = { iam: await freePort(), "platform-registry": await freePort(), billing: await freePort(), "stack-registry": await freePort() };
    for (const name of Object.keys(ports) as (keyof typeof ports)[]) urls[name] = `http://127.0.0.1:${ports[name]}`;
    const iamUrl = urls.iam;
    iam = await createIam(database, {
      config: { iamUrl, registryUrl: urls["platform-registry"], trustedOrigins: [iamUrl] },
      serviceCredentials: new Map(Object.entries(SECRETS)),
    });
    // two-factor codes are of the wall clock's time
    iam.clock.now = () => new Date();
    await applyMigrations(database.db, "platform-registry", platformRegistryMigrations);
    await applyMigrations(database.db, "billing", billingMigrations);
    await applyMigrations(database.db, "stack-registry", stackRegistryMigrations);
    const resolversOf = (serviceId: keyof typeof SECRETS) => {
      const tokens = new ServiceTokenClient(iamUrl, { serviceId, secret: SECRETS[serviceId] });
      return { tokens, credentials: remoteResolvers({ iamUrl, serviceId, tokens }) };
    };
    const platformRegistry = createPlatformRegistryApp({ db: database.db, logger: silentLogger(), ...resolversOf("platform-registry") });
    const billing = createBillingApp({
      db: database.db,
      logger: silentLogger(),
      config: testBillingConfig({ billingUrl: urls.billing, registryUrl: urls["platform-registry"], iamUrl }),
      ...resolversOf("billing"),
    });
    const stackRegistry = createStackRegistryApp({ db: database.db, logger: silentLogger(), ...resolversOf("stack-registry") });
    servers = [
      await listen(iam.app, ports.iam, "127.0.0.1"),
      await listen(platformRegistry, ports["platform-registry"], "127.0.0.1"),
      await listen(billing, ports.billing, "127.0.0.1"),
      await listen(stackRegistry, ports["stack-registry"], "127.0.0.1"),
    ];
    vaultDir = makeTestVault();
    vault = await startVaultServer(vaultDir.dir, {}, {
      access: (resource) => new VaultAccess({ resource, issuer: iamUrl, keys: iamKeySet(iamUrl, "vault"), credentials: resolversOf("vault").credentials }),
    });

    // a tenant with a platform, set up by its owner; a member joins; the owner then requires two-factor
    const person = await signUp(iam);
    const slug = uniqueSlug("policy");
    const setup = await call(iam, "POST", "/api/core/org-setup", { cookie: person.cookie, body: { name: `Policy ${slug}`, slug } });
    expect(setup.status, JSON.stringify(setup.body)).toBe(201);
    ({ orgId, platformId } = setup.body);
    ({ owner, member } = await heldBackMember(iam, { orgId, owner: person }));
  });
  afterAll(async () => {
    await vault?.close();
    vaultDir?.remove();
    for (const server of servers) await server.close();
    await database?.close();
  });

  const bearer = (who: { token: string }) => ({ authorization: `Bearer ${who.token}` });
  async function ask(url: string, init: RequestInit = {}) {
    const response = await fetch(url, init);
    return { status: response.status, challenge: response.headers.get("www-authenticate"), body: (await response.json()) as any };
  }
  /** the refusal every service gives the held-back member: the policy, its organization, and the IAM page, as an address to open */
  const policyRefusal = () => ({
    code: "FORBIDDEN",
    message: TWO_FACTOR_MESSAGE,
    requestId: expect.any(String),
    details: { policy: "TWO_FACTOR_REQUIRED", orgId, location: `${urls.iam}/account/two-factor?required=1` },
  });

  it("billing: the platform's subscription and invoices are refused naming the policy", async () => {
    for (const path of [`/subscription?platformId=${platformId}`, `/invoices?platformId=${platformId}`, "/payment-methods"]) {
      const answer = await ask(`${urls.billing}${path}`, { headers: bearer(member) });
      expect(answer.status, path).toBe(403);
      expect(answer.body.error, path).toEqual(policyRefusal());
    }
  });

  it("the platform registry: the platform and the list of platforms are refused naming the policy", async () => {
    for (const path of [`/platforms/${platformId}`, "/platforms", `/platforms/${platformId}/stacks`]) {
      const answer = await ask(`${urls["platform-registry"]}${path}`, { headers: bearer(member) });
      expect(answer.status, path).toBe(403);
      expect(answer.body.error, path).toEqual(policyRefusal());
    }
  });

  it("the stack registry: a change of the catalogue is refused naming the policy; reading it needs no organization and stays open", async () => {
    const write = await ask(`${urls["stack-registry"]}/api/v1/stacks`, {
      method: "POST",
      headers: { ...bearer(member), "content-type": "application/json" },
      body: JSON.stringify({ name: "held-back", displayName: "Held back", description: "A template" }),
    });
    expect(write.status).toBe(403);
    expect(write.body.error).toEqual(policyRefusal());
    expect((await ask(`${urls["stack-registry"]}/api/v1/stacks`, { headers: bearer(member) })).status).toBe(200);
  });

  it("the vault: 403 insufficient_scope whose error description names the policy, with the policy's details", async () => {
    const answer = await ask(`${vault.url}/mcp`, {
      method: "POST",
      headers: { ...bearer(member), "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "read_doc", arguments: { path: "services/iam" } } }),
    });
    expect(answer.status).toBe(403);
    expect(answer.body.error).toEqual(policyRefusal());
    expect(answer.challenge).toBe(
      `Bearer error="insufficient_scope", scope="vault:read", error_description="${TWO_FACTOR_MESSAGE}", resource_metadata="${vault.url}/.well-known/oauth-protected-resource/mcp"`,
    );
  });

  it("answers the owner, whose session meets the policy, as usual: the refusals are the policy's", async () => {
    expect((await ask(`${urls.billing}/subscription?platformId=${platformId}`, { headers: bearer(owner) })).status).toBe(200);
    expect((await ask(`${urls["platform-registry"]}/platforms/${platformId}`, { headers: bearer(owner) })).status).toBe(200);
  });
});
