import Ajv2020, { type ErrorObject, type ValidateFunction } from "ajv/dist/2020.js";
import addFormats from "ajv-formats";

/**
 * Checks a service's answers against its own OpenAPI description (issue 28: a description says
 * what the server does). The description is OpenAPI 3.1, whose schemas are JSON Schema 2020-12
 * (OAS 3.1 §4.8.24), so they are validated as such by ajv's 2020-12 validator, with the four
 * keywords OAS adds to that dialect as annotations. OpenAPI 3.0's `nullable` is not one of them:
 * a 3.1 client ignores it, so it is reported, and left out of what the answers are checked against
 * (ajv would otherwise honour it in any dialect).
 */

type Json = Record<string, any>;
export interface Described {
  method: string;
  path: string;
  operation: Json;
}

export interface Answer {
  status: number;
  contentType: string;
  text: string;
}

/** One way an answer breaks its description. */
export interface Mismatch {
  operation: string;
  status: number;
  problem: string;
  /** the request, shortened, for reading the failure */
  request: string;
}

const OAS_ANNOTATIONS = ["example", "discriminator", "xml", "externalDocs"];
// the document's own top-level fields: schemas are reached by JSON pointer into it
const DOCUMENT_FIELDS = ["openapi", "info", "jsonSchemaDialect", "servers", "paths", "webhooks", "components", "security", "tags"];
const OAS_31_DIALECT = "https://spec.openapis.org/oas/3.1/dialect/base";

const pointer = (parts: string[]) => parts.map((p) => encodeURIComponent(p.replace(/~/g, "~0").replace(/\//g, "~1"))).join("/");
const mediaOf = (contentType: string) => contentType.split(";")[0]!.trim().toLowerCase();

export class Conformance {
  readonly operations: Described[];
  /** Places where the description is not valid in its own dialect (today: `nullable`). */
  readonly descriptionProblems: string[] = [];
  private readonly ajv: Ajv2020;
  private readonly components: Record<string, Json>;
  private readonly responses: Record<string, Json>;
  private readonly validators = new Map<string, ValidateFunction>();
  private readonly matchers: { described: Described; pattern: RegExp; literal: boolean }[];

  constructor(document: Json, private readonly id = "described") {
    if (!String(document.openapi).startsWith("3.1.")) throw new Error(`an OpenAPI ${document.openapi} description: this checker reads 3.1 (JSON Schema 2020-12)`);
    const dialect = document.jsonSchemaDialect ?? OAS_31_DIALECT;
    if (dialect !== OAS_31_DIALECT && dialect !== "https://json-schema.org/draft/2020-12/schema") throw new Error(`an unknown jsonSchemaDialect: ${dialect}`);
    const copy = structuredClone(document);
    this.withoutNullable(copy.components ?? {}, "#/components");
    this.withoutNullable(copy.paths ?? {}, "#/paths");
    this.components = (copy.components?.schemas ?? {}) as Record<string, Json>;
    this.responses = (copy.components?.responses ?? {}) as Record<string, Json>;
    // an unknown keyword (a typo, 3.0's nullable) fails loudly; the rest of ajv's strictness flags
    // schemas that are valid 2020-12 (a required field named only in allOf), which are not faults
    this.ajv = new Ajv2020({ strictSchema: true, strictTypes: false, strictTuples: false, strictRequired: false, allErrors: true, keywords: [...OAS_ANNOTATIONS, ...DOCUMENT_FIELDS] });
    addFormats(this.ajv);
    this.ajv.addSchema(copy, id);
    this.operations = Object.entries(copy.paths as Record<string, Json>).flatMap(([path, item]) =>
      Object.entries(item)
        .filter(([method]) => ["get", "post", "put", "patch", "delete"].includes(method))
        .map(([method, operation]) => ({ method: method.toUpperCase(), path, operation })),
    );
    this.matchers = this.operations.map((described) => ({
      described,
      literal: !described.path.includes("{"),
      pattern: new RegExp(`^${described.path.replace(/[.*+?^$()|[\]\\]/g, "\\$&").replace(/\{\w+\}/g, "[^/]+")}$`),
    }));
  }

  /** `nullable` is OpenAPI 3.0's; in 3.1 null is a type. Reported, and dropped from the copy that is validated against. */
  private withoutNullable(node: unknown, at: string): void {
    if (Array.isArray(node)) return node.forEach((child, i) => this.withoutNullable(child, `${at}/${i}`));
    if (typeof node !== "object" || node === null) return;
    const object = node as Json;
    if ("nullable" in object && (typeof object.type === "string" || Array.isArray(object.type) || object.enum)) {
      this.descriptionProblems.push(`${decodeURIComponent(at)}: "nullable" is not a keyword of OpenAPI 3.1's dialect (say type: [..., "null"])`);
      delete object.nullable;
    }
    for (const [key, child] of Object.entries(object)) this.withoutNullable(child, `${at}/${pointer([key])}`);
  }

  private resolveResponse(response: Json): Json {
    let current = response;
    for (let i = 0; current.$ref && i < 10; i++) current = this.responses[String(current.$ref).replace("#/components/responses/", "")] ?? {};
    return current;
  }

  /** `schema`, or the component it refers to. */
  resolve(schema: Json | undefined): Json | undefined {
    let current = schema;
    for (let i = 0; current?.$ref && i < 10; i++) current = this.components[String(current.$ref).replace("#/components/schemas/", "")];
    return current;
  }

  /** The operation a request goes to: a literal path before a templated one, as routers do. */
  operationOf(method: string, path: string): Described | undefined {
    const candidates = this.matchers.filter((m) => m.described.method === method && m.pattern.test(path));
    return (candidates.find((m) => m.literal) ?? candidates[0])?.described;
  }

  /** What is wrong with `answer` as an answer of `described` (empty when it is what the description says). */
  check(described: Described, answer: Answer, request: string): Mismatch[] {
    const name = `${described.method} ${described.path}`;
    const found: Mismatch[] = [];
    const mismatch = (problem: string) => found.push({ operation: name, status: answer.status, problem, request });
    const responses = (described.operation.responses ?? {}) as Record<string, Json>;
    const key = String(answer.status) in responses ? String(answer.status) : `${String(answer.status)[0]}XX` in responses ? `${String(answer.status)[0]}XX` : "default" in responses ? "default" : null;
    if (!key) {
      mismatch(`status ${answer.status} is not described (described: ${Object.keys(responses).join(", ")}); body ${answer.text.slice(0, 200)}`);
      return found;
    }
    // a shared response of the description (components.responses) is followed to what it says
    const response = this.resolveResponse(responses[key]!);
    const content = response.content as Record<string, Json> | undefined;
    if (!content) {
      // a described answer without content (a redirect): nothing but the status to keep
      if (answer.text !== "" && answer.status !== 302 && answer.status !== 303) mismatch(`a body where none is described: ${answer.text.slice(0, 200)}`);
      return found;
    }
    const media = mediaOf(answer.contentType);
    const listed = Object.keys(content);
    if (!listed.map(mediaOf).includes(media)) {
      mismatch(`content type ${answer.contentType || "(none)"} is not described (described: ${listed.join(", ")}); body ${answer.text.slice(0, 200)}`);
      return found;
    }
    if (!/json/.test(media)) return found;
    let body: unknown;
    try {
      body = JSON.parse(answer.text);
    } catch {
      mismatch(`a ${media} body that is not JSON: ${answer.text.slice(0, 200)}`);
      return found;
    }
    const mediaKey = listed.find((m) => mediaOf(m) === media)!;
    if (content[mediaKey]!.schema === undefined) return found;
    const shared = responses[key]!.$ref ? String(responses[key]!.$ref).slice(2).split("/").map((p) => p.replace(/~1/g, "/").replace(/~0/g, "~")) : null;
    const at = [...(shared ?? ["paths", described.path, described.method.toLowerCase(), "responses", key]), "content", mediaKey, "schema"];
    const validate = this.validatorOf(at);
    if (!validate(body)) {
      // ajv names a keyword inside a component from the document's root, any other from the answer's schema
      const base = `#/${at.map((p) => p.replace(/~/g, "~0").replace(/\//g, "~1")).join("/")}`;
      for (const error of validate.errors ?? []) {
        const where = error.schemaPath.startsWith("#/components/") ? error.schemaPath : `${base}${error.schemaPath.slice(1)}`;
        mismatch(`${errorText(error)} (schema ${where}); body ${answer.text.slice(0, 300)}`);
      }
    }
    return found;
  }

  /**
   * What is wrong with the description of a request body the server accepted (answered 2xx): the
   * body of a working request must be one its description allows, or clients cannot send it.
   */
  checkAcceptedRequest(described: Described, status: number, contentType: string, text: string, request: string): Mismatch[] {
    const content = (described.operation.requestBody?.content ?? {}) as Record<string, Json>;
    const media = mediaOf(contentType);
    const mediaKey = Object.keys(content).find((m) => mediaOf(m) === media);
    const name = `${described.method} ${described.path}`;
    if (!mediaKey) {
      return Object.keys(content).length ? [{ operation: name, status, problem: `accepted a ${media} request body, which is not described (described: ${Object.keys(content).join(", ")})`, request }] : [];
    }
    if (content[mediaKey]!.schema === undefined) return [];
    let body: unknown;
    try {
      body = media === "application/x-www-form-urlencoded" ? Object.fromEntries(new URLSearchParams(text)) : JSON.parse(text);
    } catch {
      return [{ operation: name, status, problem: `accepted a request body that is not ${media}: ${text.slice(0, 120)}`, request }];
    }
    const at = ["paths", described.path, described.method.toLowerCase(), "requestBody", "content", mediaKey, "schema"];
    const validate = this.validatorOf(at);
    if (validate(body)) return [];
    return (validate.errors ?? []).map((error) => ({ operation: name, status, problem: `accepted a request whose ${errorText(error)} by its description (schema ${error.schemaPath})`, request }));
  }

  private validatorOf(parts: string[]): ValidateFunction {
    const ref = `${this.id}#/${pointer(parts)}`;
    let validate = this.validators.get(ref);
    if (!validate) {
      validate = this.ajv.getSchema(ref);
      if (!validate) throw new Error(`no schema at ${ref}`);
      this.validators.set(ref, validate);
    }
    return validate;
  }
}

/** A validator error as words: where in the body, and what the schema asked. */
function errorText(error: ErrorObject): string {
  const extra = error.keyword === "additionalProperties" ? ` (${(error.params as { additionalProperty: string }).additionalProperty})` : "";
  return `body${error.instancePath || "/"} ${error.message}${extra}`;
}

/** Mismatches as lines of a failure message. */
export const mismatchLines = (found: Mismatch[]) => found.map((m) => `${m.operation} answered ${m.status}: ${m.problem}\n    after ${m.request}`);

export interface SendOptions {
  /** a JSON body (sent as text as it is when a string) */
  body?: unknown;
  contentType?: string;
  token?: string;
  cookie?: string;
  headers?: Record<string, string>;
}

/**
 * Requests over real HTTP to a listening service, each answer checked against the description of
 * the operation it went to; what every operation answered is kept, for the gaps.
 */
export class ConformanceClient {
  readonly mismatches: Mismatch[] = [];
  /** statuses answered, by operation (`METHOD /path/{template}`) */
  readonly answered = new Map<string, number[]>();

  constructor(readonly conformance: Conformance, readonly baseUrl: string) {}

  async send(method: string, path: string, options: SendOptions = {}) {
    const url = new URL(path, this.baseUrl);
    const headers: Record<string, string> = { origin: new URL(this.baseUrl).origin, ...options.headers };
    if (options.token) headers.authorization = `Bearer ${options.token}`;
    if (options.cookie) headers.cookie = options.cookie;
    let text: string | undefined;
    if (options.body !== undefined) {
      text = typeof options.body === "string" ? options.body : JSON.stringify(options.body);
      headers["content-type"] ??= options.contentType ?? "application/json";
    }
    const response = await fetch(url, { method, headers, body: text, redirect: "manual", signal: AbortSignal.timeout(30_000) });
    const answer = { status: response.status, contentType: response.headers.get("content-type") ?? "", text: await response.text() };
    const request = `${method} ${url.pathname}${url.search.slice(0, 120)}${text === undefined ? "" : ` with ${text.slice(0, 160)}`}${options.token || options.cookie || /^(authorization|cookie|x-api-key)$/im.test(Object.keys(options.headers ?? {}).join("\n")) ? "" : " (no credential)"}`;
    const described = this.conformance.operationOf(method, url.pathname);
    if (!described) {
      this.mismatches.push({ operation: `${method} ${url.pathname}`, status: answer.status, problem: "no operation of the description has this method and path", request });
    } else {
      const name = `${described.method} ${described.path}`;
      this.answered.set(name, [...(this.answered.get(name) ?? []), answer.status]);
      this.mismatches.push(...this.conformance.check(described, answer, request));
      if (text !== undefined && answer.status < 300) this.mismatches.push(...this.conformance.checkAcceptedRequest(described, answer.status, headers["content-type"]!, text, request));
    }
    let body: any = null;
    try {
      body = answer.text ? JSON.parse(answer.text) : null;
    } catch {
      body = answer.text;
    }
    return { status: answer.status, body, headers: response.headers, text: answer.text };
  }

  /** Operations that never answered a 2xx or 3xx: no happy path reached them. */
  withoutHappyPath(): string[] {
    return this.conformance.operations
      .map((d) => `${d.method} ${d.path}`)
      .filter((name) => !(this.answered.get(name) ?? []).some((status) => status < 400));
  }

  /** The mismatches found since `from` (an index into `mismatches`). */
  since(from: number): Mismatch[] {
    return this.mismatches.slice(from);
  }
}

export interface BadRequest {
  path: string;
  /** why a 2xx or 3xx answer to it is wrong, when it is */
  mustRefuse?: string;
  body?: unknown;
  contentType?: string;
  credential: boolean;
}

/**
 * The generic bad requests for one operation: without a credential; with one but no body or query;
 * unknown ids in the path; a body of the wrong type; every described field of the wrong type;
 * query parameters of the wrong type; a body that is not JSON.
 */
export function badRequests(described: Described, known: Record<string, string>, conformance: Conformance): BadRequest[] {
  const parameters = (described.operation.parameters ?? []) as { name: string; in: string; schema?: Json }[];
  const pathWith = (value: (name: string) => string, query = "") =>
    described.path.replace(/\{(\w+)\}/g, (_, name: string) => encodeURIComponent(value(name))) + query;
  const knownPath = pathWith((name) => known[name] ?? "no-such-id");
  const unknownPath = pathWith(() => "no-such-id");
  const takesBody = described.method !== "GET" && described.method !== "DELETE";
  const media = Object.keys(described.operation.requestBody?.content ?? {})[0] ?? "application/json";
  const schema = conformance.resolve(described.operation.requestBody?.content?.[media]?.schema) ?? {};
  const wrong = (field: Json | undefined): unknown => {
    const type = Array.isArray(field?.type) ? field!.type[0] : field?.type;
    return type === "string" ? { a: 1 } : type === "object" || type === "array" ? "text" : type === "number" || type === "integer" || type === "boolean" ? "text" : [{ a: 1 }];
  };
  const encode = (value: unknown) => (media === "application/x-www-form-urlencoded" && typeof value === "object" && value !== null && !Array.isArray(value)
    ? new URLSearchParams(Object.entries(value).map(([k, v]): [string, string] => [k, JSON.stringify(v)])).toString()
    : JSON.stringify(value));
  const requests: BadRequest[] = [
    { path: knownPath, credential: false },
    { path: knownPath, credential: true },
    ...(unknownPath !== knownPath ? [{ path: unknownPath, credential: true }] : []),
  ];
  const query = parameters.filter((p) => p.in === "query");
  const knownQuery = query.filter((p) => known[p.name] !== undefined);
  if (knownQuery.length) {
    // not a bad request: the known values, so reads that need them answer what they find
    requests.push({ path: `${knownPath}?${new URLSearchParams(knownQuery.map((p): [string, string] => [p.name, known[p.name]!])).toString()}`, credential: true });
  }
  if (query.length) {
    const wrongQuery = new URLSearchParams(query.map((p): [string, string] => [p.name, p.schema?.type === "string" && !p.schema.enum ? "x".repeat(3000) : "not-a-number"])).toString();
    requests.push({ path: `${knownPath}?${wrongQuery}`, credential: true });
  }
  if (takesBody) {
    requests.push(
      { path: knownPath, credential: true, body: encode({}), contentType: media },
      { path: knownPath, credential: true, body: "not json", contentType: "text/plain" },
    );
    const properties = (schema.properties ?? {}) as Record<string, Json>;
    const resolvedField = (field: Json) => conformance.resolve(field) ?? field;
    if (Object.keys(properties).length) {
      // what the server cannot keep it must refuse (issue 28: update-user kept {"a":1} as "[object Object]")
      const mustRefuse = "a body whose every field has the wrong type";
      requests.push({ path: knownPath, credential: true, body: encode(Object.fromEntries(Object.entries(properties).map(([name, field]) => [name, wrong(resolvedField(field))]))), contentType: media, mustRefuse });
      requests.push({ path: knownPath, credential: true, body: "[1]", contentType: "application/json", mustRefuse: "an array for an object body" });
      const ids = Object.keys(properties).filter((name) => /^id$|Id$/.test(name) && resolvedField(properties[name]!).type === "string");
      if (ids.length) {
        requests.push({ path: knownPath, credential: true, body: encode(Object.fromEntries(ids.map((name) => [name, "no-such-id"]))), contentType: media, mustRefuse: `unknown ids in ${ids.join(", ")}` });
      }
    }
  }
  return requests;
}
