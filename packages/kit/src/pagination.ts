import { z } from "@hono/zod-openapi";
import { badRequest } from "./errors.js";
import { integerQuery } from "./openapi.js";

/**
 * Opaque keyset cursors (DESIGN §7): the position after the last row of a page, as base64url JSON of
 * the row's ordering key `k` and its tie-breaker `id`. Clients never build them, but they can edit
 * them: every part is checked against the kind of key the listing orders by before it reaches a
 * query, so an edited cursor is a 400, never a 500.
 */
export type KeyKind = "timestamp" | "seconds" | "sequence" | "id" | "text";

/** The value of each kind of key: timestamps as Dates, the others as numbers or id strings. */
export type KeyValue<K extends KeyKind> = K extends "timestamp" ? Date : K extends "id" | "text" ? string : number;

/** How a listing is ordered: its key and its tie-breaker (`{ key: "timestamp", tie: "id" }`). */
export interface Keyset<K extends KeyKind = KeyKind, T extends KeyKind = KeyKind> {
  key: K;
  tie: T;
}

export interface CursorPosition<K extends KeyKind = KeyKind, T extends KeyKind = KeyKind> {
  k: KeyValue<K>;
  id: KeyValue<T>;
}

const ISO_INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const ROW_ID = /^[A-Za-z0-9_-]{1,128}$/;
const CURSOR_TEXT = /^[A-Za-z0-9_-]{1,1024}$/;
const CONTROL = /[\u0000-\u001f\u007f]/;

/** Each kind's check of a decoded value: the value as the query needs it, or undefined when it is not one. */
const KEY_CHECKS: { [K in KeyKind]: (value: unknown) => KeyValue<K> | undefined } = {
  timestamp: (value) => {
    if (typeof value !== "string" || !ISO_INSTANT.test(value)) return undefined;
    const date = new Date(value);
    // only what encodeCursor writes: a real instant (no 31 February), in years PostgreSQL and JavaScript agree on
    return date.getTime() >= 0 && date.toISOString() === value ? date : undefined;
  },
  seconds: (value) => (Number.isSafeInteger(value) && (value as number) >= 0 && (value as number) < 100_000_000_000 ? (value as number) : undefined),
  sequence: (value) => (Number.isSafeInteger(value) && (value as number) >= 1 ? (value as number) : undefined),
  id: (value) => (typeof value === "string" && ROW_ID.test(value) ? value : undefined),
  // names chosen by clients (a tenant id such as "acme.prod"): any printable text of 1 to 256 characters
  text: (value) => (typeof value === "string" && value.length >= 1 && value.length <= 256 && !CONTROL.test(value) ? value : undefined),
};

export function encodeCursor(position: CursorPosition): string {
  const k = position.k instanceof Date ? position.k.toISOString() : position.k;
  return Buffer.from(JSON.stringify({ k, id: position.id })).toString("base64url");
}

const invalidCursor = () => badRequest("Invalid cursor", { path: "cursor" });

/** The position a cursor of this listing holds; null for the first page (no cursor, or ""). */
export function decodeCursor<K extends KeyKind, T extends KeyKind>(cursor: string | undefined | null, keyset: Keyset<K, T>): CursorPosition<K, T> | null {
  if (!cursor) return null;
  if (!CURSOR_TEXT.test(cursor)) throw invalidCursor();
  let decoded: unknown;
  try {
    decoded = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"));
  } catch {
    throw invalidCursor();
  }
  if (typeof decoded !== "object" || decoded === null || Array.isArray(decoded)) throw invalidCursor();
  const { k, id } = decoded as { k?: unknown; id?: unknown };
  const key = KEY_CHECKS[keyset.key](k) as KeyValue<K> | undefined;
  const tie = KEY_CHECKS[keyset.tie](id) as KeyValue<T> | undefined;
  if (key === undefined || tie === undefined) throw invalidCursor();
  return { k: key, id: tie };
}

/** Query parameter for page sizes: an integer within [1, max], `default` when absent. */
export const limitParam = (defaultLimit: number, max = 100) =>
  integerQuery(1, max).default(defaultLimit).openapi({ param: { name: "limit", in: "query" }, example: defaultLimit });

/** The cursor query parameter: opaque, as issued by the previous page. */
export const cursorParam = () =>
  z
    .string()
    .max(1024)
    .optional()
    .openapi({ param: { name: "cursor", in: "query" }, description: "The cursor of the previous page, as it was answered" });

/**
 * Takes `limit + 1` rows fetched in order and returns the page plus the next cursor, or `null` on
 * the final page.
 */
export function toPage<T>(rows: T[], limit: number, position: (row: T) => CursorPosition) {
  const hasMore = rows.length > limit;
  const data = hasMore ? rows.slice(0, limit) : rows;
  const last = data[data.length - 1];
  return { data, cursor: hasMore && last ? encodeCursor(position(last)) : null };
}
