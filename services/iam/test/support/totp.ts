import { createHmac } from "node:crypto";

/** The secret of an `otpauth://` URI (base32, RFC 4648) as bytes. */
export function secretOfUri(uri: string): Buffer {
  const secret = new URL(uri).searchParams.get("secret");
  if (!secret) throw new Error("no secret in the TOTP URI");
  return base32Bytes(secret);
}

/** Base32 text (as the account page shows it, spaces allowed) as bytes. */
export function base32Bytes(text: string): Buffer {
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
  let bits = "";
  for (const ch of text.replace(/[\s=]/g, "").toUpperCase()) {
    const value = alphabet.indexOf(ch);
    if (value < 0) throw new Error(`not base32: ${ch}`);
    bits += value.toString(2).padStart(5, "0");
  }
  const bytes: number[] = [];
  for (let i = 0; i + 8 <= bits.length; i += 8) bytes.push(parseInt(bits.slice(i, i + 8), 2));
  return Buffer.from(bytes);
}

/** RFC 6238 TOTP (SHA-1, 6 digits, 30 s) for `step` steps from now; written here, not the library's, so a test checks it. */
export function totp(secret: Buffer, stepOffset = 0, nowMs = Date.now()): string {
  const counter = Math.floor(nowMs / 30_000) + stepOffset;
  const message = Buffer.alloc(8);
  message.writeBigUInt64BE(BigInt(counter));
  const mac = createHmac("sha1", secret).update(message).digest();
  const offset = mac[mac.length - 1]! & 15;
  const value = (mac.readUInt32BE(offset) & 0x7fffffff) % 1_000_000;
  return value.toString().padStart(6, "0");
}

/**
 * Waits, when less than `marginMs` is left of the current 30 s step, until the next one begins. A
 * code of the step before is accepted only while the server is still in this step (one step of
 * drift either way); on a loaded machine the request that carries it may arrive after the boundary,
 * and the refusal would then be right. Call it just before making such a code.
 */
export async function clearOfStepBoundary(marginMs = 5_000, nowMs = Date.now): Promise<void> {
  const left = 30_000 - (nowMs() % 30_000);
  if (left < marginMs) await new Promise((resolve) => setTimeout(resolve, left + 50));
}
