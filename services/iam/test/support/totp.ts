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
