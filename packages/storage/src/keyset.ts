import { and, asc, desc, eq, gt, lt, or, type AnyColumn, type SQL } from "drizzle-orm";

/**
 * Keyset pagination in SQL (DESIGN §7), the counterpart of the kit's cursors: a listing ordered by
 * (key, tie) in one direction, and the rows strictly beyond a cursor's position.
 */
export interface KeysetColumns {
  key: AnyColumn;
  tie: AnyColumn;
  direction: "asc" | "desc";
}

/** The ORDER BY of the listing. */
export function keysetOrder({ key, tie, direction }: KeysetColumns): SQL[] {
  const by = direction === "asc" ? asc : desc;
  return [by(key), by(tie)];
}

/** Rows after `position` in the listing's order, or undefined (no condition) for the first page. */
export function keysetAfter({ key, tie, direction }: KeysetColumns, position: { k: unknown; id: unknown } | null): SQL | undefined {
  if (!position) return undefined;
  const beyond = direction === "asc" ? gt : lt;
  return or(beyond(key, position.k), and(eq(key, position.k), beyond(tie, position.id)));
}
