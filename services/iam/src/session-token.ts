import { createHmac, timingSafeEqual } from "node:crypto";
import { parse } from "hono/utils/cookie";

/**
 * The session token of a request, read exactly as the auth library reads it (docs/vault/cross-cutting/security.md,
 * "one reading of the session"): every check IAM makes before the library acts (its policy gate, its
 * audit actor, its refusal of held-back sessions) must judge the session the library will then use,
 * whatever form the token arrives in. Reading it any other way let a held-back session through by
 * sending the signed form, which our lookup did not find and the library accepted (issue 35).
 *
 * How the library reads it (its bearer plugin, then its signed session cookie):
 * 1. `Authorization: Bearer <value>` (scheme case-insensitive). A value without a dot is a plain
 *    token, which the library signs itself. A value with a dot is `token.signature` (percent-decoded
 *    when it has a `%`): taken when the signature is the HMAC-SHA256 of the token under the auth
 *    secret, and then read as the cookie below would be; with a wrong signature the header is
 *    ignored and the cookie decides.
 * 2. The session cookie of the configured name (one name: `__Secure-` prefixed with secure cookies),
 *    `token.signature`, the signature 44 characters of base64: the token when it verifies.
 */
export interface SessionToken {
  token: string;
  via: "cookie" | "bearer";
}

/** The library's session cookie name (its default prefix), as `useSecureCookies` names it. */
export const sessionCookieName = (secure: boolean) => (secure ? "__Secure-better-auth.session_token" : "better-auth.session_token");

const signatureOf = (secret: string, value: string) => createHmac("sha256", secret).update(value).digest();

function signatureMatches(secret: string, value: string, signature: string | undefined): boolean {
  if (!value || !signature) return false;
  const given = Buffer.from(signature, "base64");
  const expected = signatureOf(secret, value);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/** `token.signature` as the library's signed cookie holds it: the token when the signature verifies, else null. */
function verifiedSignedValue(secret: string, signed: string): string | null {
  const dot = signed.lastIndexOf(".");
  if (dot < 1) return null;
  const signature = signed.slice(dot + 1);
  if (signature.length !== 44 || !signature.endsWith("=")) return null;
  const token = signed.slice(0, dot);
  return signatureMatches(secret, token, signature) ? token : null;
}

const decoded = (text: string) => {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
};

/** The session token of `headers` (see above), or null when the library would find no session token in them. */
export function sessionTokenOf(headers: Headers, options: { secret: string; secureCookies: boolean; cookieOnly?: boolean }): SessionToken | null {
  const authorization = options.cookieOnly ? null : headers.get("authorization");
  if (authorization && authorization.slice(0, 7).toLowerCase() === "bearer ") {
    const value = authorization.slice(7).trim();
    if (value && !value.includes(".")) return { token: value, via: "bearer" };
    if (value) {
      const signed = value.includes("%") ? decoded(value) : value;
      const [token, signature] = signed.split(".");
      if (signatureMatches(options.secret, token!, signature)) {
        const verified = verifiedSignedValue(options.secret, signed);
        return verified ? { token: verified, via: "bearer" } : null;
      }
    }
  }
  const cookie = headers.get("cookie");
  if (!cookie) return null;
  const value = parse(cookie, sessionCookieName(options.secureCookies))[sessionCookieName(options.secureCookies)];
  const token = value ? verifiedSignedValue(options.secret, value) : null;
  return token ? { token, via: "cookie" } : null;
}
