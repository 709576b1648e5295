/** The driver error under drizzle's wrapper (drizzle ≥ 0.44 wraps query errors, keeping `cause`). */
function driverError(err: unknown): { code?: string; constraint?: string; message?: string } | null {
  let current: unknown = err;
  for (let depth = 0; current && depth < 4; depth++) {
    const candidate = current as { code?: unknown; cause?: unknown };
    if (typeof candidate.code === "string" && /^[0-9A-Z]{5}$/.test(candidate.code)) return candidate as never;
    current = candidate.cause;
  }
  return null;
}

/** A unique constraint violation (SQLSTATE 23505), optionally of one named constraint or index. */
export function isUniqueViolation(err: unknown, constraint?: string): boolean {
  const e = driverError(err);
  if (e?.code !== "23505") return false;
  if (!constraint) return true;
  return e.constraint === constraint || (e.message ?? "").includes(constraint);
}

/** A foreign key violation (SQLSTATE 23503). */
export function isForeignKeyViolation(err: unknown): boolean {
  return driverError(err)?.code === "23503";
}
