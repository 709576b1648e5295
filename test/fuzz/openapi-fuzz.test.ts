import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabases } from "@core/storage";
import { hostileText, hostileVariantOf, resolve, valueOf, type Components, type Schema } from "./arbitraries.js";
import { startPlatform, type Credential, type Platform } from "./platform.js";

/**
 * Issue 10 §6: every operation of every committed OpenAPI description, sent generated hostile
 * inputs with and without valid credentials, over real HTTP to the real services. What must hold:
 * no 5xx; every 4xx in an error shape its description lists for that status (our envelope with the
 * right `details` rule, the auth library's own shape, RFC 6749's, JSON-RPC's); every status one the
 * description lists; no credential echoed back. New routes are covered as soon as they are
 * described. Seeded and bounded: FUZZ_SEED and FUZZ_RUNS (runs per operation) change both.
 */
const SEED = Number(process.env.FUZZ_SEED ?? 20261123);
const RUNS = Number(process.env.FUZZ_RUNS ?? 80);

interface Parameter {
  name: string;
  in: "path" | "query" | "header" | "cookie";
  required?: boolean;
  schema?: Schema;
}
interface Operation {
  tags?: string[];
  parameters?: Parameter[];
  requestBody?: { content?: Record<string, { schema?: Schema }> };
  responses: Record<string, { content?: Record<string, { schema?: Schema }> }>;
}
interface Described {
  service: "iam" | "billing" | "stack-registry" | "platform-registry" | "vault";
  method: string;
  path: string;
  operation: Operation;
  components: Components;
}

const OPENAPI_DIR = join(import.meta.dirname, "../../openapi");
const DESCRIBED: Described[] = readdirSync(OPENAPI_DIR)
  .filter((f) => f.endsWith(".json"))
  .flatMap((file) => {
    const document = JSON.parse(readFileSync(join(OPENAPI_DIR, file), "utf8")) as {
      paths: Record<string, Record<string, Operation>>;
      components?: { schemas?: Components };
    };
    const service = file.replace(/\.json$/, "") as Described["service"];
    return Object.entries(document.paths).flatMap(([path, item]) =>
      Object.entries(item).map(([method, operation]) => ({ service, method: method.toUpperCase(), path, operation, components: document.components?.schemas ?? {} })),
    );
  });

interface Sent {
  method: string;
  url: string;
  headers: Record<string, string>;
  body?: string;
  credential: string;
}

/** One generated request for an operation: path and query values, a body, and a credential. */
function requests(described: Described, platform: Platform, credentials: Credential[]): fc.Arbitrary<{ sent: Sent; secret: string | null }> {
  const { operation, components } = described;
  const parameters = operation.parameters ?? [];
  const known = (name: string) => platform.known[name] ?? platform.known.id!;
  const pathValues = fc.record(
    Object.fromEntries(
      parameters
        .filter((p) => p.in === "path")
        .map((p) => [p.name, fc.oneof({ weight: 2, arbitrary: fc.constantFrom(...known(p.name)) }, { weight: 1, arbitrary: hostileText }, { weight: 1, arbitrary: valueOf(p.schema ?? {}, components).map(String) })]),
    ),
  );
  const queryValues = fc.record(
    Object.fromEntries(
      parameters
        .filter((p) => p.in === "query")
        .map((p) => [p.name, fc.oneof({ weight: 2, arbitrary: valueOf(p.schema ?? {}, components).map(String) }, { weight: 1, arbitrary: hostileText }, { weight: 1, arbitrary: fc.constantFrom(...known(p.name)) })]),
    ),
    { requiredKeys: [] },
  );
  const media = Object.keys(operation.requestBody?.content ?? {})[0];
  const bodySchema = media ? (operation.requestBody!.content![media]!.schema ?? {}) : null;
  const body: fc.Arbitrary<unknown> = bodySchema
    ? fc.oneof({ weight: 1, arbitrary: valueOf(bodySchema, components) }, { weight: 2, arbitrary: hostileVariantOf(valueOf(bodySchema, components)) })
    : fc.oneof({ weight: 4, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: hostileVariantOf(fc.constant({})) });
  const rawBody = fc.constantFrom('{"unterminated": ', "[".repeat(100_000), `${'{"a":'.repeat(5000)}{}${"}".repeat(5000)}`, "not json at all", '{"a":"\\ud800"}');
  return fc
    .record({
      path: pathValues,
      query: queryValues,
      body,
      raw: fc.option(rawBody, { freq: 8 }),
      credential: fc.constantFrom(...credentials),
      stray: fc.option(fc.constantFrom("x=%00", "cursor=%00", "limit=", "since="), { freq: 6 }),
    })
    .map(({ path, query, body, raw, credential, stray }) => {
      const filled = described.path.replace(/\{(\w+)\}/g, (_, name: string) => percentEncoded(String(path[name] ?? "x")));
      const search = new URLSearchParams(Object.entries(query).map(([k, v]): [string, string] => [k, String(v)]));
      const queryText = [search.toString(), stray].filter(Boolean).join("&");
      const base = platform.urls[described.service];
      const headers: Record<string, string> = { ...credential.headers };
      let text: string | undefined;
      if (raw !== null && described.method !== "GET") text = raw;
      else if (body !== undefined && described.method !== "GET") {
        text = media === "application/x-www-form-urlencoded" && typeof body === "object" && body !== null && !Array.isArray(body)
          ? new URLSearchParams(Object.entries(body).map(([k, v]): [string, string] => [k, typeof v === "string" ? v : JSON.stringify(v)])).toString()
          : JSON.stringify(body);
      }
      if (text !== undefined) headers["content-type"] = media ?? "application/json";
      return {
        sent: { method: described.method, url: `${base}${filled}${queryText ? `?${queryText}` : ""}`, headers, body: text, credential: credential.name },
        secret: credential.secret,
      };
    });
}

/** A path segment percent-encoded byte by byte, lone surrogates included (encodeURIComponent throws on them). */
const percentEncoded = (text: string) =>
  [...Buffer.from(text, "utf8")].map((b) => (/[A-Za-z0-9._~-]/.test(String.fromCharCode(b)) ? String.fromCharCode(b) : `%${b.toString(16).toUpperCase().padStart(2, "0")}`)).join("");

/** The error shapes a description can list, by the component it names. */
const SHAPES: Record<string, (body: any) => boolean> = {
  ErrorEnvelope: (b) => typeof b?.error?.code === "string" && typeof b.error.message === "string" && typeof b.error.requestId === "string",
  AuthLibraryError: (b) => typeof b?.message === "string",
  OAuthError: (b) => typeof b?.error === "string",
  AuthOAuthError: (b) => typeof b?.error === "string",
  JsonRpcAnswer: (b) => b?.jsonrpc === "2.0" && (b.error === undefined || typeof b.error.code === "number"),
};

/** The component names an answer's schema allows (a $ref, or the alternatives of anyOf / oneOf). */
function shapesOf(schema: Schema | undefined, components: Components): string[] {
  if (!schema) return [];
  if (schema.$ref) return [schema.$ref.replace("#/components/schemas/", "")];
  const alternatives = schema.anyOf ?? schema.oneOf ?? [];
  const named = alternatives.flatMap((a) => shapesOf(a, components));
  // an inline error object { error: { code, message } } is the envelope
  const inline = resolve(schema, components).properties?.error ? ["ErrorEnvelope"] : [];
  return [...named, ...inline];
}

async function send(sent: Sent) {
  const response = await fetch(sent.url, { method: sent.method, headers: sent.headers, body: sent.body, redirect: "manual", signal: AbortSignal.timeout(20_000) });
  const text = await response.text();
  return { status: response.status, text, contentType: response.headers.get("content-type") ?? "" };
}

function check(described: Described, sent: Sent, secret: string | null, answer: Awaited<ReturnType<typeof send>>) {
  const where = `${sent.method} ${sent.url.slice(0, 300)} as ${sent.credential}${sent.body ? ` with ${sent.body.slice(0, 300)}` : ""}`;
  // the one 5xx a description may list: billing's reserved POST /subscription answers 501 by design (spec §4.4)
  const reserved = answer.status === 501 && "501" in described.operation.responses;
  if (!reserved) expect(answer.status, `${where} answered ${answer.status}: ${answer.text.slice(0, 500)}`).toBeLessThan(500);
  const listed = described.operation.responses;
  expect(Object.keys(listed), `${where} answered ${answer.status}, which its description does not list: ${answer.text.slice(0, 300)}`).toContain(String(answer.status));
  expect(answer.text, `${where} answered a stack trace`).not.toMatch(/\n\s+at .+\(.+:\d+:\d+\)/);
  if (answer.status < 400) return;
  // an error body never carries the credential that was refused or used
  if (secret) expect(answer.text.includes(secret), `${where} echoed the credential in a ${answer.status}`).toBe(false);
  expect(answer.contentType, `${where}: a ${answer.status} that is not JSON: ${answer.text.slice(0, 200)}`).toMatch(/json/);
  let body: any;
  expect(() => (body = JSON.parse(answer.text)), `${where}: a ${answer.status} whose body is not JSON: ${answer.text.slice(0, 200)}`).not.toThrow();
  const shapes = shapesOf(listed[String(answer.status)]!.content?.["application/json"]?.schema, described.components);
  const matched = shapes.filter((name) => SHAPES[name]?.(body));
  expect(matched.length, `${where}: a ${answer.status} in none of the listed shapes (${shapes.join(", ")}): ${answer.text.slice(0, 300)}`).toBeGreaterThan(0);
  if (matched.includes("ErrorEnvelope") && body.error) {
    // spec §2.3: details is in every envelope but the whoami route's and billing's upgrade route's
    const withoutDetails = described.path.startsWith("/api/v1/cli/") || described.path === "/api/billing/upgrade";
    expect("details" in body.error, `${where}: details ${withoutDetails ? "present" : "missing"}: ${answer.text.slice(0, 300)}`).toBe(!withoutDetails);
    if (body.error.code === "VALIDATION_ERROR" && !withoutDetails) {
      expect(body.error.details, `${where}: VALIDATION_ERROR without its fields`).toEqual(expect.arrayContaining([expect.objectContaining({ path: expect.any(String), message: expect.any(String) })]));
    }
  }
}

describe.each(testDatabases())("every described operation under hostile input on $name", (database) => {
  let platform: Platform;
  let credentials: Credential[];
  const logLevel = process.env.LOG_LEVEL;

  beforeAll(async () => {
    // thousands of refused requests: only what goes wrong is worth a log line
    process.env.LOG_LEVEL = "error";
    platform = await startPlatform(database.name === "postgres" ? process.env.TEST_DATABASE_URL : undefined);
  }, 120_000);
  afterAll(async () => {
    if (logLevel === undefined) delete process.env.LOG_LEVEL;
    else process.env.LOG_LEVEL = logLevel;
    await platform?.stop();
  });

  it("describes every service it fuzzes", () => {
    expect(new Set(DESCRIBED.map((d) => d.service))).toEqual(new Set(["iam", "billing", "stack-registry", "platform-registry", "vault"]));
    expect(DESCRIBED.length).toBeGreaterThan(100);
  });

  it.each(DESCRIBED.map((d) => [`${d.service} ${d.method} ${d.path}`, d] as const))("%s", async (_, described) => {
    credentials = await platform.credentials();
    await fc.assert(
      fc.asyncProperty(requests(described, platform, credentials), async ({ sent, secret }) => {
        check(described, sent, secret, await send(sent));
      }),
      { seed: SEED, numRuns: RUNS, endOnFailure: true },
    );
  });
});
