import { z } from "@hono/zod-openapi";
import type { Context } from "hono";
import { ApiError, validationError } from "./errors.js";
import { screenedJsonText } from "./input-screen.js";

/** The error envelope as an OpenAPI component (spec §2.3). */
export const ErrorEnvelopeSchema = z
  .object({
    error: z.object({
      code: z.string().openapi({ example: "VALIDATION_ERROR" }),
      message: z.string(),
      requestId: z.string(),
      details: z.unknown().nullable().optional().openapi({
        description:
          "null unless there is more to say: the failing fields of a VALIDATION_ERROR; for a FORBIDDEN caused by an organization's policy { policy: TWO_FACTOR_REQUIRED | SSO_REQUIRED, orgId, location } (docs/vault/cross-cutting/errors.md)",
      }),
    }),
  })
  .openapi("ErrorEnvelope");

const STATUS_TEXT: Record<number, string> = {
  400: "Invalid input (VALIDATION_ERROR with the failing fields in details, or BAD_REQUEST)",
  401: "No credential, or an invalid one (UNAUTHENTICATED)",
  403: "The caller may not do this (FORBIDDEN, PLATFORM_SUSPENDED). A session held back by its organization's two-factor or SSO policy gets FORBIDDEN with details { policy, orgId, location }: location is the IAM page where the person complies",
  404: "Not found (NOT_FOUND)",
  409: "Conflicts with the current state",
  413: "Request body too large (PAYLOAD_TOO_LARGE)",
  415: "The request body is not JSON (UNSUPPORTED_MEDIA_TYPE)",
  431: "The URL and headers exceed 16 KiB (HEADERS_TOO_LARGE)",
  429: "Rate limited (RATE_LIMITED, with Retry-After)",
  502: "An upstream service failed (UPSTREAM_UNAVAILABLE)",
  503: "An upstream service is unavailable (UPSTREAM_UNAVAILABLE)",
};

/** Error responses for a route description: `...errorResponses(400, 401, 403)`. */
export function errorResponses(...statuses: number[]) {
  return Object.fromEntries(
    statuses.map((s) => [
      s,
      { description: STATUS_TEXT[s] ?? "Error", content: { "application/json": { schema: ErrorEnvelopeSchema } } },
    ]),
  );
}

type Operation = { security?: unknown[]; responses?: Record<string, unknown> };
const BODILESS = new Set(["get", "head", "options"]);

/**
 * The statuses the kit itself can answer on any route (DESIGN §3), added to each operation of a
 * description that does not list them: 400 (input screening: U+0000 in any path or query value,
 * malformed or too deep JSON), 431 (a URL and headers beyond the HTTP server's 16 KiB), 413 and
 * 415 wherever a body can be sent, 401 where a credential is required, 429 where an API key is. A client reading the description then meets no status it was not told of.
 */
export function withKitStatuses<T extends { paths?: Record<string, unknown> }>(document: T): T {
  for (const item of Object.values(document.paths ?? {}) as Record<string, Operation>[]) {
    for (const [method, operation] of Object.entries(item)) {
      if (typeof operation !== "object" || operation === null || !("responses" in operation)) continue;
      const secured = operation.security ?? [];
      // wrong API keys are limited per client wherever a key is accepted (ADR 0012)
      const takesApiKeys = secured.some((requirement) => typeof requirement === "object" && requirement !== null && "apiKey" in requirement);
      const statuses = [400, 431, ...(BODILESS.has(method) ? [] : [413, 415]), ...(secured.length ? [401] : []), ...(takesApiKeys ? [429] : [])];
      const responses = (operation.responses ??= {});
      for (const status of statuses) {
        responses[status] ??= { description: STATUS_TEXT[status], content: { "application/json": { schema: { $ref: "#/components/schemas/ErrorEnvelope" } } } };
      }
    }
  }
  return document;
}

/**
 * A PATCH body that must change something: at least one of its (optional) fields, said in the
 * description too (`minProperties: 1`).
 */
export function changingSomething<T extends z.ZodObject>(schema: T) {
  return schema
    .refine((value) => Object.values(value).some((field) => field !== undefined), "Give at least one field to change")
    .openapi({ minProperties: 1 });
}

/** A required JSON request body. */
export function jsonBody<T extends z.ZodType>(schema: T, description?: string) {
  return { required: true, description, content: { "application/json": { schema } } } as const;
}

/** A JSON response. */
export function jsonContent<T extends z.ZodType>(schema: T, description: string) {
  return { description, content: { "application/json": { schema } } } as const;
}

/** Bounded strings as the spec writes them: `min1`, `1-100` … */
export const text = (min: number, max?: number) => (max === undefined ? z.string().min(min) : z.string().min(min).max(max));

// Number("") is 0: a blank query value must not pass for zero
const blankIsNaN = (value: unknown) => (typeof value === "string" && value.trim() === "" ? Number.NaN : value);

/**
 * An integer query parameter within [min, max], coerced from its text; a blank value (`?since=`) is
 * refused, never read as 0. Described as the integer it is.
 */
export const integerQuery = (min: number, max: number) =>
  z.preprocess(blankIsNaN, z.coerce.number().int().min(min).max(max)).openapi({ type: "integer", minimum: min, maximum: max });

/** Security requirements for route descriptions (typed loosely: a literal array of mixed keys trips route inference). */
type SecurityRequirement = Record<string, string[]>;
export const security = {
  /** a session token or service token as Bearer, or an API key in x-api-key */
  anyCredential: [{ bearer: [] }, { apiKey: [] }] as SecurityRequirement[],
  bearer: [{ bearer: [] }] as SecurityRequirement[],
  session: [{ sessionCookie: [] }, { bearer: [] }] as SecurityRequirement[],
  cookie: [{ sessionCookie: [] }] as SecurityRequirement[],
  basic: [{ basic: [] }] as SecurityRequirement[],
};

/**
 * The body of a JSON request checked against `schema`, with the same answers as the validator
 * middleware: malformed JSON is 400 BAD_REQUEST, a mismatch 400 VALIDATION_ERROR with the fields.
 * For the few hot routes that cannot afford the middleware (ADR 0005): it reads the text the kit's
 * screen has already read, without waiting, so the route need not be async. Not for `ownsBody`
 * paths, whose bodies the kit leaves unread.
 */
export function readJsonBody<T extends z.ZodType>(c: Context, schema: T): z.infer<T> {
  let value: unknown;
  try {
    value = JSON.parse(screenedJsonText(c) ?? "");
  } catch {
    throw new ApiError(400, "BAD_REQUEST", "Malformed JSON in request body");
  }
  const result = schema.safeParse(value);
  if (!result.success) throw validationError(result.error, "body");
  return result.data;
}
