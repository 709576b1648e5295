import { randomBytes } from "node:crypto";

const ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz";

/** Opaque ids with a type prefix (DESIGN §2): `plt_`, `stk_`, `aud_` … 20 random base36 characters. */
export function newId(prefix: string): string {
  const bytes = randomBytes(20);
  let out = "";
  for (const b of bytes) out += ALPHABET[b % 36];
  return `${prefix}_${out}`;
}
