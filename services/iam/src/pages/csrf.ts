import type { Context } from "hono";
import { getCookie, setCookie } from "hono/cookie";
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";

/** The hidden form field every page form carries. */
export const CSRF_FIELD = "csrf";

/**
 * CSRF tokens of the pages (OWASP CSRF cheat sheet: "signed double-submit cookie", and the
 * synchronizer token bound to the session). A signed-in form's token is an HMAC of the session
 * token, which only the server and the httpOnly cookie know; a signed-out form (sign-in, sign-up)
 * is bound the same way to a random httpOnly cookie, so login CSRF fails too. Tokens carry no
 * state on the server and stay valid as long as what they are bound to.
 */
export function csrfToken(secret: string, binding: CsrfBinding): string {
  return createHmac("sha256", secret).update(`core-pages-csrf\0${binding.kind}\0${binding.value}`).digest("base64url");
}

export type CsrfBinding = { kind: "session" | "browser"; value: string };

export function csrfTokenMatches(secret: string, binding: CsrfBinding, given: unknown): boolean {
  if (typeof given !== "string" || given.length === 0) return false;
  const expected = Buffer.from(csrfToken(secret, binding));
  const actual = Buffer.from(given);
  return actual.length === expected.length && timingSafeEqual(actual, expected);
}

/** `__Host-` keeps sibling subdomains from planting the cookie (RFC 6265bis §4.1.3.2); it needs HTTPS. */
const browserCookieName = (secure: boolean) => (secure ? "__Host-core.csrf" : "core.csrf");
const BROWSER_ID = /^[A-Za-z0-9_-]{43}$/;

/** The browser's random CSRF cookie, if it has a well-formed one. */
export function browserBinding(c: Context, secure: boolean): CsrfBinding | null {
  const value = getCookie(c, browserCookieName(secure));
  return value && BROWSER_ID.test(value) ? { kind: "browser", value } : null;
}

/** The browser's CSRF cookie, set on this response when it has none yet. */
export function ensureBrowserBinding(c: Context, secure: boolean): CsrfBinding {
  const existing = browserBinding(c, secure);
  if (existing) return existing;
  const value = randomBytes(32).toString("base64url");
  setCookie(c, browserCookieName(secure), value, { path: "/", httpOnly: true, sameSite: "Lax", secure, maxAge: 86_400 });
  return { kind: "browser", value };
}
