import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { ApiError } from "@core/kit";
import type { KeyedAnswer } from "../idempotency.js";

/**
 * The answer of a request run under an idempotency key: a replay carries `Idempotent-Replayed: true`
 * (DESIGN §6.6); a stored refusal is answered as the refusal it was, in this route's envelope.
 */
export function keyedAnswer(c: Context, keyed: KeyedAnswer): never {
  const headers: Record<string, string> = keyed.replayed ? { "idempotent-replayed": "true" } : {};
  if (keyed.status >= 400) {
    const stored = (keyed.body as { error: { code: string; message: string; details?: unknown } }).error;
    throw new ApiError(keyed.status as 402, stored.code, stored.message, stored.details ?? null, headers);
  }
  // the status and body are the ones the route stored (200 or 201, its declared shape): typed loosely
  // here, since a replay comes from the database; each route's tests check them
  return c.json(keyed.body as object, keyed.status as ContentfulStatusCode, headers) as never;
}

/** Table A lives at both `{billing_url}/api/billing{suffix}` and `{billing_url}{suffix}` (spec §4.4). */
export const bothPrefixes = (suffix: string) => [suffix, `/api/billing${suffix}`] as const;

/** The route an idempotency key is scoped to: the same under either prefix (DESIGN §6.6). */
export const withoutPrefix = (path: string) => path.replace(/^\/api\/billing(?=\/)/, "");
