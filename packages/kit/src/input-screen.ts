import type { Context } from "hono";
import { cloneRawRequest } from "hono/request";
import { routePath } from "hono/route";
import { ApiError, type FieldIssue } from "./errors.js";

/**
 * JSON bodies nest at most this many levels (DESIGN §3). Deeper input is refused before it is
 * parsed: code that walks a value recursively (validators, the database driver, JSON.stringify)
 * would overflow the stack on it, and V8 parses pathological nesting slowly.
 */
export const MAX_JSON_DEPTH = 64;

/** At most this many failing fields are listed in one answer. */
const MAX_ISSUES = 20;

// a high surrogate not followed by a low one, or a low one without a high one before it
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
// in JSON text, U+0000 and surrogates can only arrive as \u escapes (raw control characters are malformed JSON)
const SUSPICIOUS_ESCAPE = /\\u(?:0000|d[89a-f])/i;
const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * Why a string cannot be kept as it was sent, or null when it can. PostgreSQL refuses U+0000 in
 * text and jsonb (a 500 if it got that far), and a lone surrogate would silently become U+FFFD on
 * its way to UTF-8: either way the input would not survive, so it is refused up front.
 */
export function unkeepableText(value: string): string | null {
  if (value.includes("\u0000")) return "Must not contain the NUL character (U+0000)";
  if (LONE_SURROGATE.test(value)) return "Must be well-formed Unicode (a lone surrogate was found)";
  return null;
}

// hono keeps promises in its body cache, though its type says values
const cachedText = (c: Context) => c.req.bodyCache as { text?: Promise<string> };

const SCREENED_TEXT = "core:screenedText";

/**
 * The JSON text of this request's body as the screen read it, or undefined when the request had no
 * body (the kit screens every JSON body it does not leave to a library: `ownsBody`).
 */
export function screenedJsonText(c: Context): string | undefined {
  return c.get(SCREENED_TEXT as never) as string | undefined;
}

type Where = "path" | "query" | "body";

function refuse(where: Where, issues: FieldIssue[]): never {
  const fields = [...new Set(issues.map((i) => i.path))].join(", ");
  throw new ApiError(400, "VALIDATION_ERROR", `Invalid ${where}: ${fields}`, issues);
}

const textIssue = (path: string, message: string): FieldIssue => ({ path, message, code: "invalid_characters" });

/**
 * Path parameters and query values: U+0000 reaches the router and the database decoded, so it is
 * refused here, naming the parameter of the route that matched. Cheap enough for every request:
 * only a path or URL that holds a NUL is looked at further.
 */
export function screenPathAndQuery(c: Context): void {
  const path = c.req.path;
  if (path.includes("\u0000")) refuse("path", [textIssue(pathParameterAt(c, path), "Must not contain the NUL character (U+0000)")]);
  const url = c.req.url;
  const q = url.indexOf("?");
  if (q === -1 || !url.includes("%00", q)) return;
  const issues: FieldIssue[] = [];
  for (const [name, value] of new URLSearchParams(url.slice(q + 1))) {
    const why = unkeepableText(name) ?? unkeepableText(value);
    if (why) issues.push(textIssue(unkeepableText(name) ? "(query)" : name, why));
  }
  if (issues.length > 0) refuse("query", issues.slice(0, MAX_ISSUES));
}

/** The name of the route parameter that holds the NUL (`/grants/:id` → `id`), else `(path)`. */
function pathParameterAt(c: Context, path: string): string {
  const pattern = routePath(c, -1).split("/");
  const index = path.split("/").findIndex((segment) => segment.includes("\u0000"));
  const name = /^:(\w+)/.exec(pattern[index] ?? "")?.[1];
  return name ?? "(path)";
}

/**
 * A JSON body read once, checked and left cached for the route: strict UTF-8 (invalid bytes would
 * become U+FFFD), well-formed JSON, nesting within MAX_JSON_DEPTH, and no string or key that cannot
 * be kept. The route's own validator and `c.req.json()` read the cached text; a library handed the
 * raw request gets it rebuilt from that text (`rawRequestOf`).
 */
export function screenJsonBody(c: Context): Promise<void> {
  // a then, not an async function: one step fewer on the hot path (ADR 0005)
  return c.req.raw.arrayBuffer().then((buffer) => screenJsonText(c, strictUtf8Text(buffer)));
}

function strictUtf8Text(buffer: ArrayBuffer): string {
  try {
    return strictUtf8.decode(buffer);
  } catch (err) {
    if (err instanceof TypeError && /encoded data was not valid/i.test(err.message)) {
      throw new ApiError(400, "BAD_REQUEST", "The request body is not valid UTF-8");
    }
    throw err;
  }
}

function screenJsonText(c: Context, text: string): void {
  cachedText(c).text = Promise.resolve(text);
  c.set(SCREENED_TEXT as never, text as never);
  if (text.length === 0) return;
  const tooDeep = nestingBeyond(text, MAX_JSON_DEPTH);
  if (tooDeep) refuse("body", [{ path: "(body)", message: `JSON may nest at most ${MAX_JSON_DEPTH} levels deep`, code: "too_deep" }]);
  if (!SUSPICIOUS_ESCAPE.test(text)) return;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new ApiError(400, "BAD_REQUEST", "Malformed JSON in request body");
  }
  const issues = jsonTextIssues(value);
  if (issues.length > 0) refuse("body", issues);
}

/** A form body (pages, OAuth): parsed once, as the route will read it, and its values checked. */
export async function screenFormBody(c: Context): Promise<void> {
  const form = await c.req.parseBody();
  const issues: FieldIssue[] = [];
  for (const [name, value] of Object.entries(form)) {
    if (typeof value !== "string") continue;
    const why = unkeepableText(name) ?? unkeepableText(value);
    if (why) issues.push(textIssue(unkeepableText(name) ? "(body)" : name, why));
  }
  if (issues.length > 0) refuse("body", issues.slice(0, MAX_ISSUES));
}

/**
 * Whether JSON text nests deeper than `limit` (brackets inside strings do not count). A linear scan,
 * so a hostile body costs no more than reading it.
 */
export function nestingBeyond(text: string, limit: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i);
    if (inString) {
      if (ch === 92 /* \ */) i++;
      else if (ch === 34 /* " */) inString = false;
    } else if (ch === 34) inString = true;
    else if (ch === 123 /* { */ || ch === 91 /* [ */) {
      if (++depth > limit) return true;
    } else if (ch === 125 /* } */ || ch === 93 /* ] */) depth--;
  }
  return false;
}

interface PathNode {
  parent: PathNode | null;
  key: string | number;
}

const pathText = (node: PathNode | null): string => {
  const keys: (string | number)[] = [];
  for (let n = node; n; n = n.parent) keys.unshift(n.key);
  return keys.length === 0 ? "(body)" : keys.join(".");
};

/** Strings and field names of a parsed JSON value that cannot be kept, by their dotted paths. */
function jsonTextIssues(root: unknown): FieldIssue[] {
  const issues: FieldIssue[] = [];
  // iterative: the nesting is bounded already, but the walk needs no stack of its own either way
  const pending: [unknown, PathNode | null][] = [[root, null]];
  while (pending.length > 0 && issues.length < MAX_ISSUES) {
    const [value, at] = pending.pop()!;
    if (typeof value === "string") {
      const why = unkeepableText(value);
      if (why) issues.push(textIssue(pathText(at), why));
    } else if (Array.isArray(value)) {
      for (let i = value.length - 1; i >= 0; i--) pending.push([value[i], { parent: at, key: i }]);
    } else if (value !== null && typeof value === "object") {
      for (const [key, child] of Object.entries(value).reverse()) {
        const node = { parent: at, key };
        const why = unkeepableText(key);
        if (why) issues.push(textIssue(pathText(node), `Field name: ${why}`));
        else pending.push([child, node]);
      }
    }
  }
  return issues;
}

/**
 * The request as it arrived, for a library that reads the raw request itself (better-auth, the MCP
 * SDK): once the screen has read the body, it is rebuilt from the cached text.
 */
export async function rawRequestOf(c: Context): Promise<Request> {
  const raw = c.req.raw;
  if (!raw.bodyUsed) return raw;
  const text = await cachedText(c).text;
  // a form read by the screen: hono rebuilds it from its own cache
  if (text === undefined) return cloneRawRequest(c.req);
  return new Request(raw.url, { method: raw.method, headers: raw.headers, body: text, signal: raw.signal });
}
