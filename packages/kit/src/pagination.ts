import { z } from "@hono/zod-openapi";
import { badRequest } from "./errors.js";

/**
 * Opaque keyset cursors (DESIGN §7): the position after the last row of a page, as base64url JSON of
 * the ordering key. Clients never build them; a tampered cursor is a 400, never a 500.
 */
export interface CursorPosition {
  /** the ordering value of the last row (ISO timestamp or number) */
  k: string | number;
  /** the id of the last row, to break ties */
  id: string;
}

export function encodeCursor(position: CursorPosition): string {
  return Buffer.from(JSON.stringify(position)).toString("base64url");
}

const positionSchema = z.object({ k: z.union([z.string(), z.number()]), id: z.string() });

export function decodeCursor(cursor: string | undefined | null): CursorPosition | null {
  if (!cursor) return null;
  try {
    return positionSchema.parse(JSON.parse(Buffer.from(cursor, "base64url").toString("utf8")));
  } catch {
    throw badRequest("Invalid cursor", { path: "cursor" });
  }
}

/** Query parameter for page sizes: an integer within [1, max], `default` when absent. */
export const limitParam = (defaultLimit: number, max = 100) =>
  z.coerce
    .number()
    .int()
    .min(1)
    .max(max)
    .default(defaultLimit)
    .openapi({ param: { name: "limit", in: "query" }, example: defaultLimit });

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
