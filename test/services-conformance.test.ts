import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabases } from "@core/storage";
import { badRequests, Conformance, ConformanceClient, mismatchLines } from "../services/iam/test/support/conformance.js";
import { startPlatform, type Credential, type Platform } from "./fuzz/platform.js";

/**
 * Issue 28, for the services besides IAM (IAM has its own, scripted, services/iam/test/openapi-conformance.test.ts):
 * every operation of billing's, the registries' and the vault's served OpenAPI descriptions, over
 * real HTTP to the services as `npm start` runs them (the fuzzer's seeded platform), with the
 * generic bad requests, and each GET with every id the seed knows, as the tenant's owner and as an
 * operator. Each answer's status, content type and body are checked against the description with
 * a JSON Schema 2020-12 validator. A few writes are scripted; most of billing's are not, and the
 * last test prints which operations answered nothing but errors.
 */
const SERVICES = ["billing", "stack-registry", "platform-registry", "vault"] as const;
type Service = (typeof SERVICES)[number];

const OPENAPI_DIR = join(import.meta.dirname, "../openapi");
const COMMITTED = Object.fromEntries(
  readdirSync(OPENAPI_DIR)
    .filter((file) => SERVICES.includes(file.replace(/\.json$/, "") as Service))
    .map((file) => {
      const document = JSON.parse(readFileSync(join(OPENAPI_DIR, file), "utf8")) as { paths: Record<string, Record<string, unknown>> };
      return [file.replace(/\.json$/, ""), Object.entries(document.paths).flatMap(([path, item]) => Object.keys(item).map((method) => `${method.toUpperCase()} ${path}`))];
    }),
) as Record<Service, string[]>;
const CASES = SERVICES.flatMap((service) => COMMITTED[service].map((operation) => [`${service} ${operation}`, service, operation] as const));

describe.each(testDatabases())("billing, the registries and the vault answer as their descriptions say, on $name", (database) => {
  let platform: Platform;
  let clients: Record<Service, ConformanceClient>;
  let credentials: Credential[];
  const logLevel = process.env.LOG_LEVEL;

  beforeAll(async () => {
    process.env.LOG_LEVEL = "error";
    platform = await startPlatform(database.name === "postgres" ? process.env.TEST_DATABASE_URL : undefined);
    clients = Object.fromEntries(
      await Promise.all(
        SERVICES.map(async (service) => {
          const served = (await (await fetch(`${platform.urls[service]}/openapi.json`)).json()) as Record<string, any>;
          return [service, new ConformanceClient(new Conformance(served), platform.urls[service])];
        }),
      ),
    ) as Record<Service, ConformanceClient>;
  }, 120_000);
  afterAll(async () => {
    if (logLevel === undefined) delete process.env.LOG_LEVEL;
    else process.env.LOG_LEVEL = logLevel;
    await platform?.stop();
  });

  it("serves the committed descriptions, in their dialect (3.1: no nullable)", () => {
    for (const service of SERVICES) {
      expect(clients[service].conformance.operations.map((d) => `${d.method} ${d.path}`).sort(), service).toEqual([...COMMITTED[service]].sort());
      expect(clients[service].conformance.descriptionProblems, service).toEqual([]);
    }
  });

  it.each(CASES)("%s", async (_, service, name) => {
    const client = clients[service];
    const described = client.conformance.operations.find((d) => `${d.method} ${d.path}` === name)!;
    expect(described, `${name} is committed but not served: run npm run openapi`).toBeDefined();
    credentials = await platform.credentials();
    const as = credentials.filter((c) => c.name === "tenant owner session" || c.name === "operator session");
    const known = Object.fromEntries(Object.entries(platform.known).map(([k, values]) => [k, values[0]!]));
    const from = client.mismatches.length;
    const accepted: string[] = [];
    for (const request of badRequests(described, known, client.conformance)) {
      for (const credential of request.credential ? as : [undefined]) {
        const r = await client.send(described.method, request.path, { body: request.body, contentType: request.contentType, headers: credential?.headers });
        if (request.mustRefuse && r.status < 400) accepted.push(`${name} answered ${r.status} to ${request.mustRefuse} as ${credential?.name}: ${request.body} → ${r.text.slice(0, 300)}`);
      }
    }
    // reads are safe to repeat: each with every id the seed knows, for the answers that find something
    const parameters = [...described.path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]!);
    if (described.method === "GET" && parameters.length === 1) {
      for (const value of new Set(platform.known[parameters[0]!] ?? platform.known.id!)) {
        for (const credential of as) await client.send("GET", described.path.replace(/\{\w+\}/, encodeURIComponent(value)), { headers: credential.headers });
      }
    }
    expect(mismatchLines(client.since(from)).join("\n")).toBe("");
    expect(accepted.join("\n")).toBe("");
  });

  it("answers a few scripted writes as described: billing's webhook endpoints, test clock, cards and portal; the registries' stacks and platforms", async () => {
    credentials = await platform.credentials();
    const owner = credentials.find((c) => c.name === "tenant owner session")!.headers;
    const operator = credentials.find((c) => c.name === "operator session")!.headers;
    const [platformId] = platform.known.platformId!;
    const step = async (service: Service, method: string, path: string, headers: Record<string, string>, body?: unknown) => {
      const r = await clients[service].send(method, path, { headers, body });
      if (r.status < 200 || r.status > 299) throw new Error(`${service} ${method} ${path}: expected a 2xx, answered ${r.status}: ${r.text.slice(0, 400)}`);
      return r;
    };
    const from = Object.fromEntries(SERVICES.map((service) => [service, clients[service].mismatches.length]));

    const hook = await step("billing", "POST", "/operator/webhook-endpoints", operator, { url: "https://hooks.example.com/billing", description: "conformance" });
    await step("billing", "POST", `/operator/webhook-endpoints/${hook.body.id}/rotate-secret`, operator);
    await step("billing", "GET", `/operator/webhook-endpoints/${hook.body.id}/deliveries`, operator);
    await step("billing", "DELETE", `/operator/webhook-endpoints/${hook.body.id}`, operator);
    await step("billing", "POST", "/operator/test-clock/advance", operator, { seconds: 60 });
    const card = await step("billing", "POST", `/api/billing/payment-methods?platformId=${platformId}`, { ...owner, "idempotency-key": crypto.randomUUID() }, { paymentMethodId: "pm_card_mastercard" });
    await step("billing", "POST", `/api/billing/payment-methods/${card.body.id}/default?platformId=${platformId}`, owner);
    await step("billing", "POST", `/api/billing/portal?platformId=${platformId}`, owner, { returnUrl: "http://localhost/account" });
    const customerId = (await step("billing", "GET", `/api/billing/customer?platformId=${platformId}`, owner)).body.id;
    await step("billing", "POST", "/operator/credits", { ...operator, "idempotency-key": crypto.randomUUID() }, { customerId, amount: "5", description: "conformance credit" });
    const spare = await step("billing", "POST", `/api/billing/payment-methods?platformId=${platformId}`, { ...owner, "idempotency-key": crypto.randomUUID() }, { paymentMethodId: "pm_card_visa" });
    await step("billing", "DELETE", `/api/billing/payment-methods/${spare.body.id}?platformId=${platformId}`, owner);

    await step("stack-registry", "PATCH", "/api/v1/stacks/web-app", operator, { description: "A web app, described" });
    await step("stack-registry", "POST", "/api/v1/stacks", operator, { name: "worker", displayName: "Worker", description: "A background worker" });
    await step("stack-registry", "POST", "/api/v1/stacks/worker/versions", operator, { version: "1.0.0", stackDefinition: { services: ["worker"] }, coreSdkVersion: "1.0.0" });
    await step("platform-registry", "POST", "/platforms", operator, { name: "Another", slug: "another-conformance", tier: "starter" });
    await step("platform-registry", "PATCH", `/platforms/${platformId}`, owner, { name: "Fuzz, renamed" });
    await step("platform-registry", "POST", `/platforms/${platformId}/stacks`, owner, { tenantId: "tenant-2", name: "api" });

    expect(SERVICES.flatMap((service) => mismatchLines(clients[service].since(from[service]!))).join("\n")).toBe("");
  });

  it("lists the operations no answer reached with a 2xx or 3xx (their happy path is not scripted)", () => {
    for (const service of SERVICES) {
      const gaps = clients[service].withoutHappyPath();
      console.info(`${service}: operations without a happy path (${gaps.length} of ${clients[service].conformance.operations.length}):\n  ${gaps.join("\n  ")}`);
    }
    expect(SERVICES.every((service) => clients[service].withoutHappyPath().length < clients[service].conformance.operations.length)).toBe(true);
  });
});
