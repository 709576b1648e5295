import type { Context } from "hono";
import { deleteCookie, getCookie } from "hono/cookie";
import { html } from "hono/html";
import type { HtmlEscapedString } from "hono/utils/html";
import { ApiError, forbidden, loggableError } from "@core/kit";
import type { Principal } from "@core/service-auth";
import { requireSession, requireTrustedOrigin, sessionTokenOfRequest, type SessionCaller } from "../access.js";
import type { IamContext } from "../app.js";
import { browserBinding, CSRF_FIELD, csrfToken, csrfTokenMatches, type CsrfBinding } from "./csrf.js";
import { MessagePage, type Viewer } from "./layout.js";
import { isOutage, OUTAGE_RETRY_SECONDS } from "../outage.js";
import { allowedWhileRestricted } from "../org-policy.js";
import { REVOKED_NOTICE, REVOKED_NOTICE_COOKIE } from "../unproven-access.js";

type Markup = HtmlEscapedString | Promise<HtmlEscapedString>;

/**
 * Headers of every page: never cached (they show sessions and keys), never framed (clickjacking of
 * the Approve button), no script but our own file (passkeys), forms only to ourselves, and a referrer that stays on
 * this origin (pages carry user codes in their addresses).
 */
const PAGE_HEADERS: Record<string, string> = {
  "cache-control": "no-store",
  // script from our own origin only (/assets/passkeys.js, which calls our own routes): never inline
  "content-security-policy": "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  "x-frame-options": "DENY",
  "referrer-policy": "same-origin",
  "x-content-type-options": "nosniff",
};

export async function render(c: Context, page: Markup, status: 200 | 400 | 401 | 403 | 404 | 409 | 410 | 422 | 429 | 500 | 502 | 503 = 200) {
  for (const [name, value] of Object.entries(PAGE_HEADERS)) c.header(name, value);
  return c.html(html`<!DOCTYPE html>${await page}`, status);
}

const NOTICES: Record<string, string> = {
  [REVOKED_NOTICE]:
    "You signed in with a link sent to your address before it was confirmed. To keep the account safe, its password was " +
    "removed and its other sessions were signed out, command-line logins included. Your address is confirmed now: " +
    "set a new password below if you want one. We sent you a mail about it too.",
};

/** A notice carried by cookie to the next page (unproven-access.ts), shown once. */
function takeNotice(c: Context, secure: boolean): string | null {
  const key = getCookie(c, REVOKED_NOTICE_COOKIE);
  if (!key) return null;
  deleteCookie(c, REVOKED_NOTICE_COOKIE, { path: "/", secure });
  return NOTICES[key] ?? null;
}

/** The session token of the browser's session cookie (the pages take no other form), as the library reads it. */
export const cookieSessionToken = (c: Context, ctx: IamContext): string | null => sessionTokenOfRequest(c, { ...ctx.session, cookieOnly: true })?.token ?? null;

/** Whether the browser is signed in (the session cookie only): for pages that send a signed-in user elsewhere. */
export async function isSignedIn(c: Context, ctx: IamContext): Promise<boolean> {
  const token = cookieSessionToken(c, ctx);
  return token !== null && (await ctx.principals.bySessionToken(token)) !== null;
}

/** A GET page's signed-in user (from the session cookie only) with what the page shows them, or null. */
export async function pageSession(c: Context, ctx: IamContext): Promise<{ principal: Principal; token: string; viewer: Viewer } | null> {
  const token = cookieSessionToken(c, ctx);
  const principal = token ? await ctx.principals.bySessionToken(token) : null;
  if (!token || !principal) return null;
  const viewer = { email: principal.email ?? "", csrf: csrfToken(ctx.session.secret, { kind: "session", value: token }), notice: takeNotice(c, ctx.config.secureCookies) };
  return { principal, token, viewer };
}

export type Form = Record<string, string>;

/**
 * A form posted by a signed-in user: the session cookie from a trusted origin (requireSession),
 * and the CSRF token bound to that session.
 */
export async function sessionForm(c: Context, ctx: IamContext): Promise<{ caller: SessionCaller; form: Form; viewer: Viewer }> {
  const caller = await requireSession(c, { ...ctx.session, cookieOnly: true });
  const form = await formOf(c);
  const binding: CsrfBinding = { kind: "session", value: caller.token };
  if (!csrfTokenMatches(ctx.session.secret, binding, form[CSRF_FIELD])) throw csrfRefused();
  return { caller, form, viewer: { email: caller.principal.email ?? "", csrf: csrfToken(ctx.session.secret, binding) } };
}

/** A form posted before signing in (sign-in, sign-up): a trusted origin and the browser-bound token. */
export async function browserForm(c: Context, ctx: IamContext): Promise<Form> {
  requireTrustedOrigin(c, ctx.session.trustedOrigins);
  const form = await formOf(c);
  const binding = browserBinding(c, ctx.config.secureCookies);
  if (!binding || !csrfTokenMatches(ctx.session.secret, binding, form[CSRF_FIELD])) throw csrfRefused();
  return form;
}

const csrfRefused = () => forbidden("This form has expired or did not come from this site. Go back, reload the page and try again.");

async function formOf(c: Context): Promise<Form> {
  const type = (c.req.header("content-type") ?? "").split(";")[0]!.trim().toLowerCase();
  if (type !== "application/x-www-form-urlencoded" && type !== "multipart/form-data") return {};
  const raw = await c.req.parseBody();
  const form: Form = {};
  for (const [name, value] of Object.entries(raw)) if (typeof value === "string") form[name] = value;
  return form;
}

/**
 * Where to go after signing in: a path on this site only, else null. The address is judged as the
 * browser will follow it, after it is resolved: dot segments (`/.//host`, `/a/..//host`, `%2e`) can
 * turn a path into a scheme-relative `//host`, so the resolved path may not start with `//`. Before
 * that, no backslashes, no control characters, and no encoded slashes a later decode turns into
 * another host (docs/vault/cross-cutting/security.md, "Addresses we send a browser to").
 */
export function safeNext(value: string | undefined | null, returnOrigins: readonly string[] = []): string | null {
  if (value && /^https?:\/\//i.test(value)) return trustedReturn(value, returnOrigins);
  if (!value || value.length > 1024 || !value.startsWith("/") || value.startsWith("//")) return null;
  if (value.includes("\\") || /[\u0000-\u001f\u007f]/.test(value)) return null;
  const path = value.split(/[?#]/)[0]!;
  if (/%(2f|5c)/i.test(path)) return null;
  try {
    const url = new URL(value, "http://core.invalid");
    const resolved = url.pathname + url.search + url.hash;
    return url.origin === "http://core.invalid" && !resolved.startsWith("//") ? resolved : null;
  } catch {
    return null;
  }
}

/**
 * An absolute way back, to another of our services (billing's invoice page, its portal entry): only
 * to an origin IAM was told of (`returnOrigins`), never with credentials in it, and as the URL parses.
 */
function trustedReturn(value: string, returnOrigins: readonly string[]): string | null {
  if (value.length > 1024 || /[\u0000-\u001f\u007f\\]/.test(value)) return null;
  try {
    const url = new URL(value);
    return returnOrigins.includes(url.origin) && !url.username && !url.password ? url.href : null;
  } catch {
    return null;
  }
}

/**
 * What the auth library gets as a magic link's callback: it allows IAM's own paths, so a way back to
 * another service goes through the sign-in page, which sends a signed-in browser on to it.
 */
export const libraryCallback = (next: string) => (next.startsWith("/") ? next : `/sign-in?next=${encodeURIComponent(next)}`);

/** The sign-in page, coming back to `next` afterwards. */
export const signInAddress = (next: string) => `/sign-in?next=${encodeURIComponent(next)}`;

const TITLES: Record<number, string> = {
  400: "Check your input",
  401: "Please sign in again",
  403: "Request refused",
  404: "Not found",
  409: "Already taken",
  413: "Too much data",
  429: "Too many attempts",
  503: "Temporarily unavailable",
};


/**
 * Failures of a page handler become pages, never JSON: the handler's own ApiErrors with their
 * message; a database or another dependency out of reach as a 503 page with Retry-After, an outage
 * to wait out (DESIGN §10); anything else as a logged 500 without details.
 */
export async function pageFailure(c: Context, ctx: IamContext, err: unknown, viewer: Viewer | null = null) {
  if (err instanceof ApiError) {
    const retryAfter = err.headers["retry-after"];
    if (retryAfter) c.header("retry-after", retryAfter);
    const message =
      err.status === 401
        ? "Your session has ended. Sign in again to continue."
        : err.status === 429
          ? `Too many attempts. Wait ${retryAfter ?? 60} seconds, then try again.`
          : err.message;
    const next = err.status === 401 ? { href: "/sign-in", label: "Sign in" } : undefined;
    const page = <MessagePage title={TITLES[err.status] ?? "Something went wrong"} viewer={err.status === 401 ? null : viewer} kind="error" message={message} next={next} />;
    return render(c, page, err.status as 400);
  }
  if (await isOutage(ctx.db, err)) {
    ctx.logger.warn({ requestId: c.get("requestId"), err: loggableError(err) }, "a page's dependency is unreachable");
    c.header("retry-after", String(OUTAGE_RETRY_SECONDS));
    const message = "This page cannot be shown right now: a service it depends on is unreachable. Try again in a moment.";
    return render(c, <MessagePage title={TITLES[503]!} kind="error" message={message} />, 503);
  }
  ctx.logger.error({ requestId: c.get("requestId"), err: loggableError(err) }, "page failed");
  return render(c, <MessagePage title="Something went wrong" kind="error" message="Something went wrong on our side. Try again in a moment." />, 500);
}

/** A 303 to `to`, carrying the cookies the auth library set (or cleared) in `answer`. */
export function redirectWithCookies(c: Context, answer: Response, to: string) {
  for (const cookie of answer.headers.getSetCookie()) c.header("set-cookie", cookie, { append: true });
  c.header("cache-control", "no-store");
  return c.redirect(to, 303);
}

/** The auth library's refusal as one plain sentence for a page (its JSON is `{ code, message }`); a 429 passes its Retry-After on. */
export async function libraryRefusal(c: Context, answer: Response): Promise<string> {
  if (answer.status === 429) {
    const retryAfter = answer.headers.get("retry-after") ?? "60";
    c.header("retry-after", retryAfter);
    return `Too many attempts. Wait ${retryAfter} seconds, then try again.`;
  }
  if (answer.status >= 500) return "Something went wrong on our side. Try again in a moment.";
  let body: { code?: string; message?: string; error?: { message?: string } } = {};
  try {
    body = (await answer.json()) as typeof body;
  } catch {
    // not JSON: the status decides below
  }
  // our own refusal before the library (the policy gate, policy-gate.ts) says what to do in its envelope
  if (typeof body.error?.message === "string") return `${body.error.message.replace(/\.$/, "")}.`;
  switch (body.code) {
    case "INVALID_EMAIL_OR_PASSWORD":
      return "Wrong email or password.";
    case "INVALID_PASSWORD":
      return "Your current password is wrong.";
    case "USER_ALREADY_EXISTS":
    case "USER_ALREADY_EXISTS_USE_ANOTHER_EMAIL":
      return "An account with this email already exists. Sign in instead.";
    case "INVALID_EMAIL":
      return "Enter a valid email address.";
    case "PASSWORD_TOO_SHORT":
      return "Use a password of at least 8 characters.";
    case "PASSWORD_TOO_LONG":
      return "Use a password of at most 128 characters.";
  }
  if (answer.status === 403) return "This request was refused because it did not come from this site. Reload the page and try again.";
  return body.message ? `${body.message.replace(/\.$/, "")}.` : "The request could not be completed. Try again.";
}

/** A handler whose failures become pages (`pageFailure`); a session held back by its organization's policy is sent to comply first (org-policy.ts). */
export const page =
  (ctx: IamContext, handler: (c: Context) => Promise<Response>) =>
  (c: Context): Promise<Response> =>
    policyDetour(c, ctx)
      .then((to) => (to ? c.redirect(to, 302) : handler(c)))
      .catch((err: unknown) => pageFailure(c, ctx, err));

/** Where a GET page sends a session that does not meet its organization's policy, or null. */
async function policyDetour(c: Context, ctx: IamContext): Promise<string | null> {
  if (c.req.method !== "GET" || allowedWhileRestricted(c.req.path)) return null;
  const token = cookieSessionToken(c, ctx);
  const restriction = token ? (await ctx.principals.bySessionToken(token))?.restriction : undefined;
  if (!restriction) return null;
  if (restriction.code === "TWO_FACTOR_REQUIRED") return restriction.location;
  // the provider's sign-in comes back to the page that was asked for
  const sso = new URL(restriction.location, "http://core.invalid");
  const asked = new URL(c.req.url);
  sso.searchParams.set("next", asked.pathname + asked.search);
  return sso.pathname + sso.search;
}
