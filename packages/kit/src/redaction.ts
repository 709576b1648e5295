/**
 * Logs never carry a credential (docs/vault/cross-cutting/security.md#Logs). The one rule of what
 * is a secret in what a service writes about itself (log lines, spans), in two parts:
 *
 * - **by shape**: a value that looks like a credential, whatever route it came through: the
 *   prefixes this system mints secrets with, JWTs, and long high-entropy runs;
 * - **by route**: the path parameters a service declares secret (`createServiceApp`'s
 *   `secretPathParameters`), where the secret has no shape of its own (a reset token, an
 *   invitation id).
 *
 * Ids that are not secrets (`in_…` invoices, `plt_…` platforms, an organization's id) stay readable: an operator needs them.
 */

export const REDACTED = "[redacted]";

/**
 * The prefixes the system mints secrets with, each followed by its random part: API keys
 * (`core_`, services/iam/src/auth.ts), portal sessions (`bps_`, services/billing/src/portal.ts),
 * webhook signing secrets (`whsec_`, packages/webhooks/src/endpoints.ts), a setup or payment
 * intent's client secret (`…_secret_…`, the local provider's and Stripe's), Stripe's own keys
 * (`sk_`, `rk_` with `live_`/`test_`).
 */
const PREFIX = String.raw`(?:core_|bps_|whsec_|[sr]k_(?:live|test)_|_secret_)`;
/** a prefix's random part: at least 16 characters, judged by `looksRandom` (so `core_db_pool_connections` stays) */
const BODY = String.raw`([A-Za-z0-9_-]{16,})`;
/**
 * a JWT (service tokens, CLI and OAuth access tokens, verification links): three base64url parts,
 * the first a JSON header, beginning where a word does
 */
const JWT = String.raw`(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]*`;
/**
 * A long run that may be random bytes: 40 or more base64url characters (32 random bytes are 43:
 * device codes, refresh tokens, the data directory's secrets) or hex digits, judged by `looksRandom`,
 * so a long slug or word stays.
 */
const LONG_RUN = String.raw`[A-Za-z0-9_-]{40,}`;
/**
 * `name=value` in a query string or in text: the value goes when the name is a secret's. A name
 * begins where a word does (the look-behind), so a long text is read once, not again from each of
 * its characters.
 */
const NAMED = String.raw`(?<![A-Za-z0-9_.-])([A-Za-z][A-Za-z0-9_.-]*)=([^&\s"'<>;,]+)`;

const SHAPED = new RegExp(`${NAMED}|${PREFIX}${BODY}|(${JWT})|(${LONG_RUN})`, "g");
const PREFIXED = new RegExp(`${PREFIX}${BODY}`);
/** the shortest text a shape can be found in: `code=` and a value */
const SHORTEST = 6;

/**
 * Whether a run looks like random bytes rather than a slug, a word, a time stamp or a number: hex
 * with letters and digits, or letters of both cases, the rarer case at least 15 % of them (random
 * base64url is about half and half, and falls below 15 % once in some 40,000 draws of 32 bytes;
 * `2026-12-02T01-15-35-768Z-ada` or `getOrganizationMembersWithRoles` have a few capitals only).
 */
function looksRandom(run: string): boolean {
  if (/^[0-9a-f]+$/i.test(run)) return /[0-9]/.test(run) && /[a-f]/i.test(run);
  let upper = 0;
  let lower = 0;
  for (let i = 0; i < run.length; i++) {
    const code = run.charCodeAt(i);
    if (code >= 65 && code <= 90) upper++;
    else if (code >= 97 && code <= 122) lower++;
  }
  return Math.min(upper, lower) >= 0.15 * (upper + lower) && upper > 0 && lower > 0;
}

/** A run that holds a prefixed secret after other characters (`seti_…_secret_…`). */
function holdsPrefixed(run: string): boolean {
  const body = PREFIXED.exec(run)?.[1];
  return body !== undefined && looksRandom(body);
}

// Names whose values are secrets, compared without case, `-` or `_` (`refresh_token`, `x-api-key`,
// `clientSecret`): the logger censors them at any depth of a logged object, and they are the query
// parameters and `name=value` pairs whose values go.
const SECRET_NAME_PARTS = ["password", "passwd", "token", "secret", "apikey", "authorization", "cookie", "signature", "csrf", "credential", "otpauth"];
const SECRET_NAMES = new Set(["key", "code", "state", "usercode", "devicecode", "codeverifier", "backupcodes", "backupcode", "otp", "totp", "totpuri", "session", "jwt", "privatekey"]);
const namesSeen = new Map<string, boolean>();

/** Whether `name` (a logged object's key, a query parameter) names a secret. */
export function isSecretName(name: string): boolean {
  let secret = namesSeen.get(name);
  if (secret === undefined) {
    const plain = name.toLowerCase().replace(/[-_]/g, "");
    secret = SECRET_NAMES.has(plain) || SECRET_NAME_PARTS.some((part) => plain.includes(part));
    // keys come from code, not clients, but a library's details may bring any: the memo stays small
    if (namesSeen.size < 2_000) namesSeen.set(name, secret);
  }
  return secret;
}

/**
 * Whether a value under a secret name may stay: a `code` that names an error (`ECONNREFUSED`,
 * `INVALID_PASSWORD`: upper case and underscores) says what failed; an authorization, two-factor or
 * device code never has that shape.
 */
export const namesAnError = (name: string, value: unknown): boolean => typeof value === "string" && /^[A-Z][A-Z0-9_]*$/.test(value) && name.toLowerCase() === "code";

const LONG = new RegExp(LONG_RUN);

/**
 * Whether `text` can hold a shape at all, told cheaply (every string of every log line is asked): a
 * `name=value` has `=`, a prefix has `_`, a JWT begins `eyJ`, and a long run needs 40 characters.
 */
const mayHoldShape = (text: string): boolean =>
  text.length >= SHORTEST && (text.includes("=") || text.includes("_") || text.includes("eyJ") || (text.length >= 40 && LONG.test(text)));

/** `text` with each credential-shaped run, and each value of a secret's `name=value`, replaced by `[redacted]`. */
export function redactText(text: string): string {
  if (!mayHoldShape(text)) return text;
  return text.replace(SHAPED, (match, name?: string, value?: string, body?: string, jwt?: string, run?: string) => {
    if (name !== undefined) {
      if (isSecretName(name) && !namesAnError(name, value)) return `${name}=${REDACTED}`;
      const inner = redactText(value!);
      return inner === value ? match : `${name}=${inner}`;
    }
    if (body !== undefined) return looksRandom(body) ? REDACTED : match;
    if (jwt !== undefined) return REDACTED;
    return looksRandom(run!) || holdsPrefixed(run!) ? REDACTED : match;
  });
}

/** Whether a path segment or a query value is a credential by its shape. */
const isShaped = (value: string): boolean => mayHoldShape(value) && redactText(value) !== value;

/** `%`-encoded text as a client may send it, decoded when it can be. */
function decoded(text: string): string {
  if (!text.includes("%")) return text;
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

interface SecretRoute {
  /** the pattern's segments: a literal, or null for a parameter */
  segments: (string | null)[];
  /** the indexes (in `segments`) of the secret parameters */
  secret: number[];
}

/**
 * The path parameters a service declares secret, by route pattern (`{ "/portal/:id": ["id"] }`;
 * `{id}` as the OpenAPI routes write it is the same). A pattern covers its own route and every
 * route below it (`/portal/:id` covers `/portal/:id/invoices/:invoiceId`), so a route added under
 * it needs no declaration of its own.
 */
export class SecretRoutes {
  static readonly none = new SecretRoutes({});
  readonly #routes: SecretRoute[];

  /** whether nothing is declared */
  get empty(): boolean {
    return this.#routes.length === 0;
  }

  constructor(declared: Record<string, readonly string[]>) {
    this.#routes = Object.entries(declared).map(([pattern, names]) => {
      const parts = segmentsOf(pattern.replace(/\{(\w+)\}/g, ":$1"));
      const secret = names.map((name) => {
        const at = parts.indexOf(`:${name}`);
        if (at < 0) throw new Error(`secretPathParameters: ${pattern} has no parameter "${name}"`);
        return at;
      });
      return { segments: parts.map((part) => (part.startsWith(":") ? null : part)), secret };
    });
  }

  /**
   * The indexes of `segments` (a request path's) that are secret. `route` is the pattern of the route
   * that answered: a declared pattern applies when it is that route or above it, so the route
   * table decides (`/portal/open` is a route of its own, not a session). Without a route (nothing
   * matched, or a wildcard such as a library's `/api/auth/*`), a declared pattern applies when the
   * path begins as it does.
   */
  secretIndexes(segments: string[], route: string | undefined): number[] {
    if (this.#routes.length === 0) return NONE;
    const routeSegments = route && !route.includes("*") ? this.#segmentsOfRoute(route) : null;
    const found: number[] = [];
    for (const declared of this.#routes) {
      const against = routeSegments ?? segments;
      if (against.length < declared.segments.length) continue;
      const applies = declared.segments.every((literal, i) =>
        literal === null ? (routeSegments ? against[i]!.startsWith(":") : against[i] !== "") : routeSegments ? against[i] === literal : decoded(against[i]!).toLowerCase() === literal.toLowerCase(),
      );
      if (applies) found.push(...declared.secret);
    }
    return found;
  }

  /** a route's segments, split once: a service has a few hundred routes */
  readonly #routeSegments = new Map<string, string[]>();
  #segmentsOfRoute(route: string): string[] {
    let segments = this.#routeSegments.get(route);
    if (!segments) this.#routeSegments.set(route, (segments = segmentsOf(route)));
    return segments;
  }
}

const NONE: number[] = [];

const segmentsOf = (path: string): string[] => path.split("/").slice(1);

/**
 * A path (with or without its query string) as it may be logged or put in a span: each segment
 * that is a credential by its shape or a parameter `secrets` declares secret for the route that
 * answered (`route`, its pattern) becomes `[redacted]`, and so does each query value that is a
 * credential by shape or whose name is a secret's. Request lines and spans are given the path
 * alone: query strings are never logged (they carry magic-link and verification tokens).
 */
export function loggablePath(target: string, secrets: SecretRoutes = SecretRoutes.none, route?: string): string {
  const queryAt = target.indexOf("?");
  // most paths: nothing declared, nothing shaped (a request line is written for every request)
  if (queryAt < 0 && secrets.empty && !mayHoldShape(target)) return target;
  const path = queryAt < 0 ? target : target.slice(0, queryAt);
  const segments = segmentsOf(path);
  const secret = secrets.secretIndexes(segments, route);
  let changed = false;
  for (let i = 0; i < segments.length; i++) {
    const segment = segments[i]!;
    if (segment === "" || !(secret.includes(i) || isShaped(decoded(segment)))) continue;
    segments[i] = REDACTED;
    changed = true;
  }
  const loggable = changed ? `/${segments.join("/")}` : path;
  if (queryAt < 0) return loggable;
  const query = target
    .slice(queryAt + 1)
    .split("&")
    .map((pair) => {
      const eq = pair.indexOf("=");
      if (eq < 0) return pair;
      const name = decoded(pair.slice(0, eq));
      const value = decoded(pair.slice(eq + 1));
      return (isSecretName(name) && !namesAnError(name, value)) || isShaped(value) ? `${pair.slice(0, eq)}=${REDACTED}` : pair;
    });
  return `${loggable}?${query.join("&")}`;
}

/** An absolute URL as it may be logged or put in a span: its origin, and its path by `loggablePath`, without the query. */
export function loggableUrl(url: string | URL): string {
  const target = typeof url === "string" ? new URL(url) : url;
  return `${target.origin}${loggablePath(target.pathname)}`;
}
