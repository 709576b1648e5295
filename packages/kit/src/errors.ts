import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { ZodError } from "zod";

/** The error codes of DESIGN §3, shared by every service; services add their own specific ones. */
export type ErrorCode =
  | "VALIDATION_ERROR"
  | "BAD_REQUEST"
  | "UNAUTHENTICATED"
  | "FORBIDDEN"
  | "PLATFORM_SUSPENDED"
  | "NOT_FOUND"
  | "CONFLICT"
  | "PAYLOAD_TOO_LARGE"
  | "UNSUPPORTED_MEDIA_TYPE"
  | "RATE_LIMITED"
  | "UPSTREAM_UNAVAILABLE"
  | "INTERNAL"
  | (string & {});

/**
 * A failure that becomes the spec's error envelope (spec §2.3, §7.1).
 * `details` is null unless there is something useful to say; `omitDetails` drops the field for the
 * routes whose bodies have no `details` (IAM whoami, billing upgrade).
 */
export class ApiError extends Error {
  constructor(
    readonly status: ContentfulStatusCode,
    readonly code: ErrorCode,
    message: string,
    readonly details: unknown = null,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = "ApiError";
  }
}

export interface FieldIssue {
  path: string;
  message: string;
  code: string;
}

/** Zod issues as `details` of a 400 VALIDATION_ERROR: one entry per failing field. */
export function fieldIssues(error: ZodError): FieldIssue[] {
  return error.issues.flatMap((issue): FieldIssue[] => {
    const at = issue.path.map(String);
    // a strict object names its unknown fields in one issue: report each field on its own
    if (issue.code === "unrecognized_keys") {
      return issue.keys.map((key) => ({ path: [...at, key].join("."), message: `Unknown field "${key}"`, code: issue.code }));
    }
    return [{ path: at.join(".") || "(body)", message: issue.message, code: issue.code }];
  });
}

export function validationError(error: ZodError, where = "request"): ApiError {
  const issues = fieldIssues(error);
  const fields = [...new Set(issues.map((i) => i.path))].join(", ");
  return new ApiError(400, "VALIDATION_ERROR", `Invalid ${where}: ${fields}`, issues);
}

export const unauthenticated = (message = "Authentication required") =>
  new ApiError(401, "UNAUTHENTICATED", message);
export const forbidden = (message = "You are not allowed to do this") =>
  new ApiError(403, "FORBIDDEN", message);
export const notFound = (message = "Not found") => new ApiError(404, "NOT_FOUND", message);
/**
 * 404 for a resource asked for by its id (docs/vault/cross-cutting/security.md, "404s name nothing"):
 * the message names the kind of resource ("No such invoice") and never the id, nor anything of the
 * resource's owner, so another tenant's resource and one that never existed answer the same words
 * and nothing of theirs is repeated. `hint` says what to do, in words of the caller's own.
 */
export const resourceNotFound = (kind: string, hint?: string) => new ApiError(404, "NOT_FOUND", hint ? `No such ${kind}: ${hint}` : `No such ${kind}`);
export const conflict = (code: ErrorCode, message: string) => new ApiError(409, code, message);
export const badRequest = (message: string, details: unknown = null) =>
  new ApiError(400, "BAD_REQUEST", message, details);
export const rateLimited = (retryAfterSeconds: number) =>
  new ApiError(429, "RATE_LIMITED", "Too many requests; try again later", null, {
    "retry-after": String(Math.max(1, Math.ceil(retryAfterSeconds))),
  });
/** 503: a dependency is out of reach; `retryAfterSeconds` asks the client to come back then. */
export const upstreamUnavailable = (message: string, retryAfterSeconds?: number) =>
  new ApiError(503, "UPSTREAM_UNAVAILABLE", message, null, retryAfterSeconds === undefined ? {} : { "retry-after": String(retryAfterSeconds) });

export interface ErrorEnvelope {
  error: { code: string; message: string; requestId: string; details?: unknown };
}

export function envelope(
  code: string,
  message: string,
  requestId: string,
  details: unknown,
  withDetails = true,
): ErrorEnvelope {
  return withDetails
    ? { error: { code, message, requestId, details: details ?? null } }
    : { error: { code, message, requestId } };
}

/** Node's errors of a connection that could not be made or was lost. */
const NETWORK_CODES = new Set(["ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "EPIPE", "EHOSTUNREACH", "ENETUNREACH", "ENOTFOUND", "EAI_AGAIN", "ECONNABORTED"]);
/**
 * PostgreSQL's SQLSTATEs of a server that is not there to answer: class 08 (connection exception),
 * 57P01-57P03 (shut down, crashed, starting or stopping) and 53300 (too many connections).
 */
const UNAVAILABLE_SQLSTATE = /^(08...|57P0[1-3]|53300)$/;
/** node-postgres's own words for a connection it lost or never got (these errors carry no code). */
const DRIVER_MESSAGES = /^(Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|Client was closed and is not queryable)/;

/**
 * Whether `err` (or what it wraps: drizzle's query errors keep the driver's as `cause`) says the
 * database or another dependency could not be reached, rather than that the request was wrong:
 * such a failure is a 503 the caller may retry, never a 500 (DESIGN §3).
 */
export function isUnreachable(err: unknown): "database" | "network" | null {
  const seen = new Set<unknown>();
  const queue: unknown[] = [err];
  while (queue.length > 0 && seen.size < 8) {
    const current = queue.shift();
    if (!current || typeof current !== "object" || seen.has(current)) continue;
    seen.add(current);
    const e = current as { code?: unknown; message?: unknown; cause?: unknown; errors?: unknown };
    if (typeof e.code === "string" && UNAVAILABLE_SQLSTATE.test(e.code)) return "database";
    if (typeof e.message === "string" && DRIVER_MESSAGES.test(e.message)) return "database";
    if (typeof e.code === "string" && NETWORK_CODES.has(e.code)) return "network";
    queue.push(e.cause);
    // a connection to "localhost" tries each of its addresses: Node reports them together
    if (Array.isArray(e.errors)) queue.push(...e.errors);
  }
  return null;
}
