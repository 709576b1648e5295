import { upstreamUnavailable, type ApiError } from "./errors.js";

/**
 * How long a client is asked to wait (`Retry-After`) when a service this one calls failed without
 * saying how long itself: about what a replica's restart or a database's failover takes.
 */
export const UPSTREAM_RETRY_AFTER_SECONDS = 5;
/** the longest wait passed on from another service's `Retry-After` */
const MAX_RETRY_AFTER_SECONDS = 300;

/** 503 for another service that could not be reached (refused, reset, no answer in time). */
export function serviceUnreachable(name: string): ApiError {
  return upstreamUnavailable(`${name} is unreachable`, UPSTREAM_RETRY_AFTER_SECONDS);
}

/**
 * 503 for another service that answered, with a 5xx, that it cannot serve now: it is unavailable,
 * not unreachable, and the client is asked to wait what it asked (its `Retry-After`), else the default.
 */
export function serviceUnavailable(name: string, response: Response, now: number = Date.now()): ApiError {
  return upstreamUnavailable(`${name} is unavailable (it answered ${response.status}); try again shortly`, retryAfterSeconds(response.headers.get("retry-after"), now));
}

/**
 * The seconds of a `Retry-After` header (RFC 9110 §10.2.3: delay-seconds or an HTTP-date), at least
 * 1 and at most 300; the default when there is none or it cannot be read.
 */
export function retryAfterSeconds(header: string | null, now: number): number {
  const value = header?.trim();
  if (!value) return UPSTREAM_RETRY_AFTER_SECONDS;
  // an HTTP-date is in GMT, whatever its form (RFC 9110 §5.6.7); anything else is not read as a date
  const seconds = /^\d+$/.test(value) ? Number(value) : / GMT$/.test(value) ? Math.ceil((Date.parse(value) - now) / 1000) : NaN;
  if (!Number.isFinite(seconds)) return UPSTREAM_RETRY_AFTER_SECONDS;
  return Math.min(MAX_RETRY_AFTER_SECONDS, Math.max(1, seconds));
}
