import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * A small stack registry that answers spec §4.5 as written (shapes, status codes, error envelopes
 * with `details`, latest = highest non-deprecated release, else pre-release), for the CLI's own
 * tests until services/stack-registry is there to start. Tokens: `publisher` may write,
 * `reader` may only read, anything else is UNAUTHENTICATED.
 */
export async function startContractStackRegistry() {
  const PUBLISHER = "publisher-token";
  const READER = "reader-token";
  const DEFINITION_LIMIT = 256 * 1024;
  const SEMVER = /^[0-9]+[.][0-9]+[.][0-9]+(-[a-zA-Z0-9.]+)?$/;
  let ids = 0;
  let requestIds = 0;
  const now = () => Math.floor(Date.now() / 1000);
  interface Version { id: string; template_id: string; version: string; stack_definition: string; core_sdk_version: string; status: string; published_at: number; created_at: number }
  interface Template { id: string; name: string; display_name: string; description: string; icon: string; domain: string; status: string; created_at: number; updated_at: number; versions: Version[] }
  const templates = new Map<string, Template>();
  /** every request: method, path, authorization and body, for the tests to look at */
  const requests: { method: string; path: string; authorization: string | undefined; body: any }[] = [];

  const parts = (v: string) => {
    const [core, pre] = v.split(/-(.*)/s);
    return { nums: core!.split(".").map(Number), pre: pre ?? null };
  };
  const compare = (a: string, b: string) => {
    const x = parts(a);
    const y = parts(b);
    for (let i = 0; i < 3; i++) if (x.nums[i] !== y.nums[i]) return x.nums[i]! - y.nums[i]!;
    if (x.pre === y.pre) return 0;
    if (x.pre === null) return 1;
    if (y.pre === null) return -1;
    return x.pre < y.pre ? -1 : 1;
  };
  const latest = (t: Template) => {
    const live = t.versions.filter((v) => v.status !== "deprecated");
    const releases = live.filter((v) => !v.version.includes("-"));
    return (releases.length ? releases : live).sort((a, b) => compare(b.version, a.version))[0] ?? null;
  };
  const templateJson = ({ versions: _, ...t }: Template) => ({ ...t, latest_version: latest({ ...t, versions: _ })?.version ?? "" });

  class Refusal extends Error {
    constructor(readonly status: number, readonly code: string, message: string, readonly details: unknown = null) {
      super(message);
    }
  }

  function route(method: string, path: string, token: string | undefined, body: any): [number, unknown] {
    if (token !== PUBLISHER && token !== READER) throw new Refusal(401, "UNAUTHENTICATED", "Missing or invalid credentials");
    if (method !== "GET" && token !== PUBLISHER) throw new Refusal(403, "FORBIDDEN", "Requires the stacks:publish permission");
    const [, name, rest] = /^\/api\/v1\/stacks(?:\/([^/]+)(?:\/([^/]+))?)?$/.exec(path) ?? [];
    if (path === "/api/v1/stacks" && method === "GET") {
      const data = [...templates.values()].filter((t) => t.status === "active").map(templateJson);
      return [200, { data, total: data.length }];
    }
    const template = name ? templates.get(decodeURIComponent(name)) : undefined;
    if (name === undefined) throw new Refusal(404, "NOT_FOUND", "No such route");
    if (!template) throw new Refusal(404, "TEMPLATE_NOT_FOUND", `No stack template named "${decodeURIComponent(name)}"`);
    if (rest === undefined && method === "GET") {
      const v = latest(template);
      return [200, { template: templateJson(template), latestVersion: v }];
    }
    if (rest === undefined && method === "PATCH") {
      template.status = body.status;
      template.updated_at = now();
      return [200, { ok: true }];
    }
    if (rest === "versions" && method === "GET") return [200, { data: template.versions, total: template.versions.length }];
    if (rest === "versions" && method === "POST") {
      const issues: { path: string; message: string; code: string }[] = [];
      // the spec's pattern, narrowed as semver.org does: no leading zeros
      const semver = (field: string, value: unknown) => {
        if (typeof value !== "string" || !SEMVER.test(value) || value.length > 64 || /(^|\.)0\d/.test(value.split("-")[0]!)) {
          issues.push({ path: field, message: "a semantic version: MAJOR.MINOR.PATCH with an optional -pre-release", code: "invalid_format" });
        }
      };
      semver("version", body?.version);
      semver("coreSdkVersion", body?.coreSdkVersion);
      if (!body?.stackDefinition || typeof body.stackDefinition !== "object" || Array.isArray(body.stackDefinition)) {
        issues.push({ path: "stackDefinition", message: "Expected an object", code: "invalid_type" });
      }
      if (issues.length) throw new Refusal(400, "VALIDATION_ERROR", `Invalid request: ${issues.map((i) => i.path).join(", ")}`, issues);
      const text = JSON.stringify(body.stackDefinition);
      if (Buffer.byteLength(text) > DEFINITION_LIMIT) {
        throw new Refusal(413, "PAYLOAD_TOO_LARGE", `stackDefinition is ${Buffer.byteLength(text)} bytes serialized; the limit is ${DEFINITION_LIMIT}`, { path: "stackDefinition" });
      }
      if (template.status === "deprecated") throw new Refusal(409, "TEMPLATE_DEPRECATED", `Stack template "${template.name}" is deprecated; reactivate it before publishing`);
      if (template.versions.some((v) => v.version === body.version)) {
        throw new Refusal(409, "VERSION_EXISTS", `Version ${body.version} of "${template.name}" is already published; published versions are immutable`);
      }
      const id = `ver_${++ids}`;
      template.versions.push({ id, template_id: template.id, version: body.version, stack_definition: text, core_sdk_version: body.coreSdkVersion, status: "active", published_at: now(), created_at: now() });
      return [201, { id }];
    }
    if (rest !== undefined && rest !== "versions" && method === "DELETE") {
      const version = template.versions.find((v) => v.version === decodeURIComponent(rest));
      if (!version) throw new Refusal(404, "VERSION_NOT_FOUND", `Stack template "${template.name}" has no version ${decodeURIComponent(rest)}`);
      version.status = "deprecated";
      return [200, { ok: true }];
    }
    throw new Refusal(404, "NOT_FOUND", "No such route");
  }

  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const text = Buffer.concat(chunks).toString("utf8");
      const body = text ? JSON.parse(text) : undefined;
      const authorization = req.headers.authorization;
      const path = new URL(req.url!, "http://x").pathname;
      requests.push({ method: req.method!, path, authorization, body });
      const requestId = `req_${++requestIds}`;
      let status: number;
      let answer: unknown;
      try {
        [status, answer] = route(req.method!, path, /^Bearer (.+)$/.exec(authorization ?? "")?.[1], body);
      } catch (err) {
        if (!(err instanceof Refusal)) throw err;
        status = err.status;
        answer = { error: { code: err.code, message: err.message, requestId, details: err.details } };
      }
      res.writeHead(status, { "content-type": "application/json", "x-request-id": requestId }).end(JSON.stringify(answer));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  return {
    url,
    requests,
    publisherToken: PUBLISHER,
    readerToken: READER,
    createTemplate(name: string, fields: Partial<{ displayName: string; description: string; domain: string; icon: string }> = {}) {
      templates.set(name, {
        id: `tpl_${++ids}`,
        name,
        display_name: fields.displayName ?? `The ${name} stack`,
        description: fields.description ?? "What it is for",
        icon: fields.icon ?? "",
        domain: fields.domain ?? "",
        status: "active",
        created_at: now(),
        updated_at: now(),
        versions: [],
      });
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
