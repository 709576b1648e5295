import { z } from "@hono/zod-openapi";
import type { OpenApiDocument } from "@core/kit";
import { UNSERVED_ROUTES, type Auth } from "./auth.js";
import { LIBRARY_BOUNDS, LIBRARY_QUERY_BOUNDS, MEMBER_CHANGE_PATHS } from "./routes/auth-library.js";

type Json = Record<string, unknown>;
type Operation = Json & { responses?: Record<string, unknown>; security?: unknown; requestBody?: Json; tags?: string[]; parameters?: unknown[] };

/** Library routes anyone may call: they carry no credential requirement in our description. */
const PUBLIC = new Set([
  "/sign-up/email",
  "/sign-in/email",
  "/sign-in/magic-link",
  "/magic-link/verify",
  "/request-password-reset",
  "/reset-password",
  "/reset-password/{token}",
  "/verify-email",
  "/send-verification-email",
  "/get-session",
  "/passkey/generate-authenticate-options",
  "/passkey/verify-authentication",
  "/jwks",
  "/ok",
  "/error",
  // the second step of signing in: the two-factor cookie of the first step, no session yet
  "/two-factor/verify-totp",
  "/two-factor/verify-backup-code",
  // the OAuth provider (oauth-provider.ts): clients register themselves and authenticate as public clients
  "/oauth2/authorize",
  "/oauth2/token",
  "/oauth2/revoke",
  "/oauth2/register",
]);

/** Routes that answer a redirect to their callback URL instead of JSON when given one. */
const REDIRECTING = new Set(["/magic-link/verify", "/verify-email", "/reset-password/{token}"]);

const LIBRARY_ERROR = { $ref: "#/components/schemas/AuthLibraryError" };
const OAUTH_ERROR = { $ref: "#/components/schemas/AuthOAuthError" };
const ENVELOPE = { $ref: "#/components/schemas/ErrorEnvelope" };
const errorAnswer = (description: string, schema: unknown) => ({ description, content: { "application/json": { schema } } });

/**
 * better-auth's own routes (spec §4.2), described by the library itself and merged into IAM's
 * description under /api/auth, with what IAM adds around them: its component names prefixed
 * `Auth` (IAM has an Invitation of its own), the library's error shape `{ code, message }` beside
 * our envelope (the input screen and IAM's own bounds answer in it), and no 500, which is a bug.
 */
export function authLibraryDescription(auth: Auth): (document: OpenApiDocument) => Promise<void> {
  let library: Promise<Json> | undefined;
  return async (document) => {
    // generated once: the library's routes do not change while the process runs
    library ??= (auth.api as unknown as { generateOpenAPISchema(): Promise<Json> }).generateOpenAPISchema();
    const { paths, components } = renamed((await library) as { paths: Record<string, Record<string, Operation>>; components: { schemas: Json } });
    const target = document as unknown as { paths: Record<string, unknown>; components: { schemas: Json } };
    answersNull(components.schemas);
    nullAsType(components.schemas);
    nullAsType(paths);
    target.components.schemas = {
      ...target.components.schemas,
      ...components.schemas,
      AuthLibraryError: LIBRARY_ERROR_SCHEMA,
      AuthOAuthError: OAUTH_ERROR_SCHEMA,
      AuthListedSession: listedSession(components.schemas.AuthSession as Json | undefined),
    };
    for (const [path, item] of Object.entries(paths)) {
      const at = `/api/auth${path}`;
      // ours win: /api/auth/profile is IAM's route
      if (target.paths[at]) continue;
      for (const [method, operation] of Object.entries(item)) {
        if (UNSERVED_ROUTES.includes(`${method.toUpperCase()} ${path}`)) delete item[method];
        else describeOperation(path, operation);
      }
      if (Object.keys(item).length > 0) target.paths[at] = item;
    }
  };
}

/** A session as list-sessions answers it in IAM: the library's Session without its token, with `current` (auth.ts `withoutTokens`). */
function listedSession(session: Json | undefined): Json {
  const { token: _token, ...properties } = ((session?.properties ?? {}) as Record<string, Json>);
  const required = ((session?.required ?? []) as string[]).filter((name) => name !== "token");
  return {
    type: "object",
    description: "One of the caller's sessions, without its token (a bearer credential); revoke another by id with DELETE /api/sessions/{id}",
    properties: { ...properties, current: { type: "boolean", description: "whether this is the session of the request" } },
    required: [...required, "current"],
  };
}

const component = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const REDIRECT_ANSWER = { type: "object", properties: { redirect: { type: "boolean" }, url: { type: "string", format: "uri-reference" } }, required: ["redirect", "url"] };
const answering = (description: string, schema: Json) => (operation: Operation) => {
  operation.responses = { ...operation.responses, "200": { description, content: { "application/json": { schema } } } };
};
/** A property added to (or restated in) a route's JSON request body. */
function bodyProperty(operation: Operation, name: string, schema: Json): void {
  const body = (operation.requestBody as { content?: { "application/json"?: { schema?: { properties?: Json } } } } | undefined)?.content?.["application/json"]?.schema;
  if (body) body.properties = { ...body.properties, [name]: schema };
}

/** A property of the library's own 200 answer schema, restated. */
const answerProperty = (name: string, schema: Json) => (operation: Operation) => {
  const answer = (operation.responses?.["200"] as { content?: { "application/json"?: { schema?: { properties?: Record<string, Json> } } } } | undefined)?.content?.["application/json"]?.schema;
  if (answer?.properties?.[name]) answer.properties[name] = schema;
};

/**
 * What IAM changes in a library route's description: list-sessions answers no tokens; and the
 * answers the library leaves undescribed or describes otherwise than it sends them (issue 28,
 * each found by openapi-conformance.test.ts).
 */
const AMENDED: Record<string, (operation: Operation) => void> = {
  "/organization/cancel-invitation": answering("The invitation, now canceled", component("AuthInvitation")),
  "/organization/list-invitations": answering("The organization's invitations", { type: "array", items: component("AuthInvitation") }),
  "/organization/check-slug": answering("The slug is free (a taken one is refused with 400 SLUG_IS_TAKEN)", {
    type: "object",
    properties: { status: { type: "boolean" } },
    required: ["status"],
  }),
  "/organization/leave": answering("The membership that ended, with its user", component("AuthMember")),
  "/organization/list-members": answering("A page of the organization's members, each with its user, and how many there are", {
    type: "object",
    properties: { members: { type: "array", items: component("AuthMember") }, total: { type: "number" } },
    required: ["members", "total"],
  }),
  "/organization/get-active-member-role": answering("The caller's role in the organization", { type: "object", properties: { role: { type: "string" } }, required: ["role"] }),
  // the library describes { member }, and answers the member itself
  "/organization/update-member-role": answering("The member with the new role", component("AuthMember")),
  // without a session to refresh (the link opened on its own), the user is null
  "/verify-email": answerProperty("user", { anyOf: [component("AuthUser"), { type: "null" }] }),
  "/organization/has-permission": answerProperty("error", { type: ["string", "null"] }),
  "/list-sessions": (operation) => {
    operation.description = "The caller's active sessions, without their tokens; the caller's own is marked current";
    operation.responses = {
      ...operation.responses,
      "200": { description: "Active sessions", content: { "application/json": { schema: { type: "array", items: { $ref: "#/components/schemas/AuthListedSession" } } } } },
    };
  },
  // the plugin's list says each passkey has an updatedAt, a field its table does not have
  "/passkey/list-user-passkeys": (operation) => {
    operation.responses = {
      ...operation.responses,
      "200": { description: "The caller's passkeys", content: { "application/json": { schema: { type: "array", items: { $ref: "#/components/schemas/AuthPasskey" } } } } },
    };
  },
  // two-factor.ts: our layer's additions to the plugin's routes
  "/two-factor/disable": (operation) => {
    operation.description = "Turn two-factor off: the password and a code (TOTP or an unused backup code) are both required";
    const schema = (operation.requestBody as { content?: { "application/json"?: { schema?: { properties?: Json; required?: string[] } } } } | undefined)?.content?.["application/json"]?.schema;
    if (schema) {
      schema.properties = { ...schema.properties, code: { type: "string", description: "A current TOTP code or an unused backup code" } };
      schema.required = [...(schema.required ?? []), "code"];
    }
  },
  "/two-factor/verify-totp": (operation) => {
    operation.description =
      "Check a TOTP code: with the two-factor cookie of a password or magic-link sign-in it completes the sign-in; with a session it confirms enrolment, which signs the other sessions out (their CLI logins and apps' refresh tokens included) unless revokeOtherSessions is false. A code (or an older one) accepted before is refused with TOTP_CODE_REUSED; trustDevice: true is refused (400 TRUST_DEVICE_NOT_OFFERED): every sign-in asks for a code";
    bodyProperty(operation, "revokeOtherSessions", { type: "boolean", default: true, description: "Confirming an enrolment: sign the other sessions out (the default)" });
  },
  // session-revocation.ts: a password change signs the others out unless asked not to
  "/change-password": (operation) => {
    operation.description =
      "Change the password. The other sessions are signed out, with every CLI login and app's refresh token not made through the new session, unless revokeOtherSessions is false (the library's own default is to keep them)";
    bodyProperty(operation, "revokeOtherSessions", { type: "boolean", default: true, description: "Sign the other sessions out (the default)" });
  },
  // policy-gate.ts: a key acts in one organization, named when it is made
  "/api-key/create": (operation) => {
    operation.description =
      "Make an API key (shown once). It acts in the organization metadata.orgId names, by default the one the session acts in, and in that one only: refused 403 for an organization the caller is not a member of, or whose policy (two-factor, SSO) the session does not meet";
  },
  "/api-key/update": (operation) => {
    operation.description = "Update one of the caller's API keys; its metadata may change, not the organization it acts in (metadata.orgId: 400)";
  },
  "/passkey/generate-register-options": (operation) => {
    operation.description = "Start adding a passkey: refused 403 TWO_FACTOR_REQUIRED to a session without a second factor while one of the person's organizations requires two-factor";
  },
  "/two-factor/verify-backup-code": (operation) => {
    operation.description = "Complete a sign-in (or confirm it is you) with an unused backup code, which is spent; trustDevice: true is refused (400 TRUST_DEVICE_NOT_OFFERED)";
  },
  // the OAuth provider answers a script's request (fetch metadata, or Accept: application/json) with where to go, a browser with a 302
  "/oauth2/authorize": answering("Where the browser goes next (the sign-in page, the consent page, or the client with a code or an error), for a request from a script", REDIRECT_ANSWER),
  "/oauth2/consent": answering("Where the browser goes next: the client's redirect URI with a code, or with error=access_denied", REDIRECT_ANSWER),
  "/revoke-session": (operation) => {
    operation.description = "Revoke a session by its token (the caller's own: list-sessions shows no tokens); revoke another by id with DELETE /api/sessions/{id}";
  },
};

/**
 * Where the library's description says less than its routes answer (issue 28: a description says
 * what the server does). The library describes its tables as components, and a field it does not
 * require is a column it leaves null and answers as null, not left out: a session without an
 * active organization, an organization without a logo or metadata, a user without an image, a key
 * without a name or expiry (the conformance test, openapi-conformance.test.ts, found each).
 */
function answersNull(schemas: Json): void {
  // the library keeps an organization's metadata as JSON text and answers it so from list and
  // get-full-organization, but parsed from create and update
  const metadata = ((schemas.AuthOrganization as Json | undefined)?.properties as Record<string, Json> | undefined)?.metadata;
  if (metadata) Object.assign(metadata, { type: ["string", "object", "null"], description: "Its metadata: JSON text as listed, the object itself as create and update answer it" });
  for (const schema of Object.values(schemas) as Json[]) {
    const required = new Set((schema.required ?? []) as string[]);
    for (const [field, property] of Object.entries((schema.properties ?? {}) as Record<string, Json>)) {
      if (!required.has(field) && typeof property.type === "string") property.type = [property.type, "null"];
    }
  }
}

/**
 * The library writes OpenAPI 3.0's `nullable: true` into a 3.1 description, where it means nothing
 * (3.1's schemas are JSON Schema 2020-12, in which null is a type): a 3.1 client reads those
 * fields as never null, and the routes answer null in them. Said as 3.1 says it, everywhere in the
 * library's paths and components (plugins' routes included).
 */
function nullAsType(node: unknown): void {
  if (Array.isArray(node)) return node.forEach(nullAsType);
  if (typeof node !== "object" || node === null) return;
  const schema = node as Json;
  if (schema.nullable === true && (typeof schema.type === "string" || Array.isArray(schema.type))) {
    const types = [schema.type].flat() as string[];
    schema.type = types.includes("null") ? types : [...types, "null"];
    if (Array.isArray(schema.enum) && !schema.enum.includes(null)) schema.enum = [...schema.enum, null];
  }
  if (typeof schema.nullable === "boolean" && (typeof schema.type === "string" || Array.isArray(schema.type))) delete schema.nullable;
  for (const child of Object.values(schema)) nullAsType(child);
}

/** Routes that answer `null` (200) when the session has no active organization, or `set-active` is given none. */
const NULL_WITHOUT_ORGANIZATION = new Set(["/organization/get-organization", "/organization/get-full-organization", "/organization/set-active"]);

/**
 * The API key routes answer a key's owner as `referenceId` (a user's id, or an organization's for an
 * organization's key) and its `configId`, where the library's description says `userId`.
 */
function keyOwnerAsAnswered(schema: Json | undefined): void {
  if (!schema || typeof schema !== "object") return;
  const properties = schema.properties as Record<string, Json> | undefined;
  if (properties?.userId && !properties.referenceId) {
    const { userId: _userId, ...rest } = properties;
    schema.properties = {
      ...rest,
      referenceId: { type: "string", description: "The key's owner: the user's id, or the organization's for an organization's key" },
      configId: { type: "string", description: "The key configuration it was made with" },
    };
    if (Array.isArray(schema.required)) schema.required = (schema.required as string[]).map((name) => (name === "userId" ? "referenceId" : name));
  }
  for (const nested of Object.values((schema.properties ?? {}) as Record<string, Json>)) keyOwnerAsAnswered(nested);
  keyOwnerAsAnswered(schema.items as Json | undefined);
}

const LIBRARY_ERROR_SCHEMA = {
  type: "object",
  description: "The auth library's own error body (spec §4.2: its routes keep its shapes)",
  properties: { code: { type: "string" }, message: { type: "string" } },
  required: ["message"],
};

/** RFC 6749 §5.2's error body, which the OAuth provider's routes answer. */
const OAUTH_ERROR_SCHEMA = {
  type: "object",
  description: "RFC 6749 §5.2 / RFC 7591 §3.2.2 error",
  properties: { error: { type: "string" }, error_description: { type: "string" }, state: { type: "string" } },
  required: ["error"],
};

function describeOperation(path: string, operation: Operation): void {
  operation.tags = ["auth library"];
  AMENDED[path]?.(operation);
  operation.security = PUBLIC.has(path) ? [] : [{ sessionCookie: [] }, { bearer: [] }];
  const responses = Object.fromEntries(Object.entries(operation.responses ?? {}).filter(([status]) => Number(status) < 400));
  // some routes say nothing of their success: it is the library's JSON answer
  if (!Object.keys(responses).some((status) => status.startsWith("2"))) responses["200"] = { description: "The library's answer" };
  const success = (responses["200"] as { content?: { "application/json"?: { schema?: Json } } } | undefined)?.content?.["application/json"];
  if (success?.schema && NULL_WITHOUT_ORGANIZATION.has(path)) {
    const { description, ...organization } = success.schema;
    success.schema = { description: `${String(description ?? "The organization")}, or null when the session has no active organization`, anyOf: [organization, { type: "null" }] };
  }
  if (path.startsWith("/api-key/")) keyOwnerAsAnswered(success?.schema);
  if (REDIRECTING.has(path)) responses["302"] = { description: "Redirect to the callback URL, with ?error= when the token is refused" };
  // the OAuth provider's routes answer RFC 6749's error body besides the library's and ours
  const refusals = path.startsWith("/oauth2/") ? [OAUTH_ERROR, LIBRARY_ERROR, ENVELOPE] : [LIBRARY_ERROR, ENVELOPE];
  responses["400"] = errorAnswer("Invalid input: the library's refusal, or VALIDATION_ERROR in our envelope (U+0000, IAM's bounds)", {
    anyOf: refusals,
  });
  // the library's own error, or our envelope: for input the screen refuses, paths it does not serve, and refusals it sends without a body
  for (const [status, text] of [
    ["401", "No session, or a wrong password or token"],
    ["403", "Refused: an untrusted Origin, not allowed, or held back by an organization's policy (FORBIDDEN, details { policy, orgId, location })"],
    ["404", "Not found, or a path the library does not serve"],
    ["422", "Refused by the library's rules (an email in use, a password too short)"],
    ["429", "Rate limited (with Retry-After)"],
  ] as const) {
    responses[status] = errorAnswer(text, { anyOf: refusals });
  }
  if (MEMBER_CHANGE_PATHS.includes(path)) {
    responses["409"] = errorAnswer("Would leave the organization without a member holding org:manage (LAST_ORG_MANAGER)", ENVELOPE);
  }
  operation.responses = responses;
  // IAM's own bounds on query parameters, stated where the library states them
  const queryBounds = LIBRARY_QUERY_BOUNDS[path];
  if (queryBounds) {
    const ours = (z.toJSONSchema(queryBounds, { io: "input", unrepresentable: "any" }) as { properties: Record<string, Json> }).properties;
    for (const parameter of (operation.parameters ?? []) as { name: string; schema?: Json }[]) {
      if (ours[parameter.name]) parameter.schema = { ...pick(parameter.schema ?? {}, ["description"]), ...pick(ours[parameter.name]!, ["type", "enum", "minimum", "maximum"]) };
    }
  }
  // IAM's own bounds on the library's fields, stated where the library states the field
  const bounds = LIBRARY_BOUNDS[path];
  const properties = (operation.requestBody as { content?: { "application/json"?: { schema?: { properties?: Record<string, Json> } } } } | undefined)
    ?.content?.["application/json"]?.schema?.properties;
  if (!bounds || !properties) return;
  const ours = (z.toJSONSchema(bounds, { io: "input" }) as { properties: Record<string, Json> }).properties;
  for (const [field, constraints] of Object.entries(ours)) {
    if (properties[field]) Object.assign(properties[field]!, pick(constraints, ["minLength", "maxLength"]));
  }
}

const pick = (from: Json, keys: string[]) => Object.fromEntries(keys.filter((k) => k in from).map((k) => [k, from[k]]));

/** The library's description with its component names prefixed `Auth` and every reference to them rewritten. */
function renamed<T>(library: T): T {
  const text = JSON.stringify(library).replace(/"#\/components\/schemas\/([A-Za-z0-9_]+)"/g, '"#/components/schemas/Auth$1"');
  const copy = JSON.parse(text) as { components: { schemas: Json } };
  copy.components.schemas = Object.fromEntries(Object.entries(copy.components.schemas).map(([name, schema]) => [`Auth${name}`, schema]));
  return copy as T;
}
