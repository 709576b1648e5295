import { passkey } from "@better-auth/passkey";
import type { Db } from "@core/storage";
import type { AuditInput } from "./audit.js";
import { isOutage } from "./outage.js";
import type { IamConfig } from "./config.js";

/**
 * The passkey plugin as IAM runs it (issue 28). A passkey is bound to its relying party id, the
 * host name of IAM's own URL (CORE_IAM_URL): a passkey made on https://iam.example.com works there
 * (and on nothing else), so changing the host name makes every passkey useless. The origin a
 * ceremony must come from is IAM's own origin, not whatever Origin header the request carries.
 */
export function passkeyPlugin(config: Pick<IamConfig, "iamUrl">) {
  const url = new URL(config.iamUrl);
  return passkey({
    rpID: url.hostname,
    rpName: "Core",
    origin: url.origin,
    // the default: a passkey is added by a signed-in user (with a session younger than a day) to their own account
    registration: { requireSession: true },
  });
}

/** The passkey plugin's routes (under /api/auth) whose outcome goes to the audit log, with their action. */
export const PASSKEY_AUDITED: Record<string, AuditInput["action"]> = {
  "/passkey/verify-registration": "passkey.add",
  "/passkey/update-passkey": "passkey.rename",
  "/passkey/delete-passkey": "passkey.remove",
  "/passkey/verify-authentication": "auth.passkey_sign_in",
};

/** The routes of a ceremony or a change, each limited to CORE_RATE_LIMIT_PASSKEY per client and window. */
export const PASSKEY_RATE_LIMITED = [
  "/passkey/generate-register-options",
  "/passkey/verify-registration",
  "/passkey/generate-authenticate-options",
  "/passkey/verify-authentication",
  "/passkey/update-passkey",
  "/passkey/delete-passkey",
];

/**
 * The passkey an audited passkey route acted on, by our id (never its credential id or public key):
 * the one named in the body (rename, remove) or the one just added.
 */
export function passkeyAuditTarget(path: string, body: Record<string, unknown>, returned: unknown): { targetType: string; targetId: string } | null {
  if (path === "/passkey/update-passkey" || path === "/passkey/delete-passkey") {
    return typeof body.id === "string" ? { targetType: "passkey", targetId: body.id.slice(0, 128) } : null;
  }
  if (path === "/passkey/verify-registration") {
    const id = (returned as { id?: unknown } | null)?.id;
    return typeof id === "string" ? { targetType: "passkey", targetId: id } : null;
  }
  return null;
}

/**
 * The plugin answers 500 FAILED_TO_VERIFY_REGISTRATION to any registration its verifier rejects (a
 * passkey made for another origin or host, a malformed attestation): the client's input, not our
 * failure. Unless the database is out of reach (then it stays a failure, answered as an outage),
 * it is a 400 in the library's own shape, as the plugin's other refusals are.
 */
export async function unverifiedRegistrationAsRefusal(db: Db, path: string, response: Response): Promise<Response> {
  if (path !== "/api/auth/passkey/verify-registration" || response.status !== 500) return response;
  const body = (await response
    .clone()
    .json()
    .catch(() => null)) as { code?: string } | null;
  if (body?.code !== "FAILED_TO_VERIFY_REGISTRATION" || (await isOutage(db))) return response;
  const headers = new Headers(response.headers);
  headers.delete("content-length");
  return Response.json({ code: "FAILED_TO_VERIFY_REGISTRATION", message: "The passkey could not be verified: it was not made for this site, or its answer is malformed" }, { status: 400, headers });
}
