import type { Refusal } from "./http.js";

/**
 * Every way a `core` command can fail, with the message the user sees. A failure prints its
 * message (never a stack trace) and exits with code 1 (spec §7.4: "Exit code 1: login failed").
 * `code` is what `--json` reports as `error.code`.
 */
export class CliFailure extends Error {
  /** UPPER_SNAKE, like the services' own codes (a service's code passes through as it is) */
  readonly code: string;

  constructor(
    code: string,
    message: string,
    /** more for `--json` (a server's status, requestId and details) */
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message);
    this.name = "CliFailure";
    this.code = code.toUpperCase();
  }
}

const LOGIN_WITH_TOKEN = "core login --token <token>";

export const failures = {
  // spec §7.4, in the table's order
  interactiveLoginUnavailable: (iamUrl: string, reason: string) =>
    new CliFailure(
      "iam_unreachable",
      `Interactive login is unavailable: cannot reach IAM at ${iamUrl} (${reason}).\nCheck the network, or log in with a token: ${LOGIN_WITH_TOKEN}`,
    ),
  deviceEndpointUnavailable: (status: number) =>
    new CliFailure("device_endpoint_unavailable", `Device login endpoint not available (${status}).\nLog in with a token instead: ${LOGIN_WITH_TOKEN}`),
  codeExpired: () => new CliFailure("expired_token", "Code expired. Run: core login"),
  accessDenied: () => new CliFailure("access_denied", "Access denied."),
  loginTimedOut: () => new CliFailure("timed_out", "Login timed out. Run: core login"),

  // the rest of the device flow (RFC 8628 §3.5 errors the spec gives no row)
  deviceLoginRefused: (error: string, description: string | undefined) =>
    new CliFailure("login_refused", `IAM refused the device login: ${error}${description ? ` (${description})` : ""}. Run: core login`),
  lostContact: (iamUrl: string, reason: string) =>
    new CliFailure("iam_unreachable", `Lost contact with IAM at ${iamUrl} while waiting for approval (${reason}). Run: core login`),
  identityUnavailable: (iamUrl: string, reason: string) =>
    new CliFailure("identity_unavailable", `Approved, but IAM at ${iamUrl} did not say who you are (${reason}). Run: core login`),

  // token mode (spec §4.8)
  noToken: () => new CliFailure("usage", "No token given: pass --token <token>, or --token - to read it from standard input."),
  tokenRejected: (iamUrl: string, message: string) =>
    new CliFailure("token_rejected", `IAM at ${iamUrl} does not accept this token (${message}). Nothing was stored.`),

  // using a credential
  notLoggedIn: (credentialsPath: string) =>
    new CliFailure("not_logged_in", `Not logged in (no CORE_TOKEN and no ${credentialsPath}). Run: core login`),
  storedTokenExpired: (email: string, expiresAt: string, refreshable: boolean) =>
    new CliFailure(
      "token_expired",
      `Your login as ${email} expired at ${expiresAt}. Run: core login${refreshable ? " (or core token, which refreshes it)" : ""}`,
    ),
  tokenMalformed: (source: string) =>
    new CliFailure(
      "token_malformed",
      `${source.charAt(0).toUpperCase()}${source.slice(1)} is not a valid token: IAM issues 32 letters and digits for a login, core_ and 64 letters for an API key. Check what was pasted, or run: core login`,
    ),
  tokenNotValid: (source: string, iamUrl: string, message: string) =>
    new CliFailure("token_not_valid", `IAM at ${iamUrl} says ${source} is not valid (${message}): it may have expired or been revoked, or come from another IAM. Run: core login`),
  tokenNotAccepted: (source: string, iamUrl: string, message: string) =>
    new CliFailure("token_not_accepted", `IAM at ${iamUrl} no longer accepts ${source} (${message}): it expired or was revoked. Run: core login`),
  refreshRefused: (iamUrl: string, error: string) =>
    new CliFailure("refresh_refused", `IAM at ${iamUrl} refused to refresh your login (${error}): it was revoked or has expired. Run: core login`),
  iamUnreachable: (iamUrl: string, reason: string) =>
    new CliFailure("iam_unreachable", `Cannot reach IAM at ${iamUrl} (${reason}). Check the network, or whether IAM runs there.`),
  unexpectedAnswer: (iamUrl: string, what: string, status: number, detail: string) =>
    new CliFailure("unexpected_answer", `IAM at ${iamUrl} answered ${what} with HTTP ${status}${detail ? ` (${detail})` : ""}.`),

  /**
   * A service (the stack registry, billing) answered with its error envelope (spec §2.3): the code,
   * the message, the failing fields of a VALIDATION_ERROR, what to do next and the request id.
   */
  refused: (action: string, refusal: Refusal, hint: string | null) => {
    // a refusal by the organization's policy has one thing to do, whatever the command
    const hold = policyHoldOf(refusal.details);
    return new CliFailure(
      refusal.code,
      [
        `${action} failed: ${refusal.code}${refusal.message ? `: ${refusal.message}` : ""} (HTTP ${refusal.status})`,
        ...detailLines(refusal.details),
        ...(hold ? [policyStep(hold)] : hint ? [hint] : []),
        ...(refusal.requestId ? [`Request id: ${refusal.requestId}`] : []),
      ].join("\n"),
      { status: refusal.status, requestId: refusal.requestId, details: refusal.details },
    );
  },

  /**
   * IAM holds the login back: it does not meet its organization's policy (IAM's own routes, whoami
   * among them, answer it 403). `message` is IAM's; `hold` what the policy asks and where.
   */
  heldBack: (iamUrl: string, source: string, message: string, hold: PolicyHold, nothingStored = false) =>
    new CliFailure(
      "FORBIDDEN",
      [`IAM at ${iamUrl} holds ${source} back: ${message}.`, policyStep(hold), ...(nothingStored ? ["Nothing was stored."] : [])].join("\n"),
      { status: 403, details: hold },
    ),

  // the stack registry (spec §4.5)
  registryUnreachable: (url: string, reason: string) =>
    new CliFailure(
      "registry_unreachable",
      `Cannot reach the stack registry at ${url} (${reason}). Check the address (--registry-url, CORE_STACK_REGISTRY_URL) or whether it runs there.`,
    ),
  registryAnswerUnreadable: (url: string) => new CliFailure("unexpected_answer", `The stack registry at ${url} gave an answer core cannot read.`),

  // billing (spec §4.4, DESIGN §6)
  billingUnreachable: (url: string, reason: string) =>
    new CliFailure("billing_unreachable", `Cannot reach billing at ${url} (${reason}). Check the address (--billing-url, CORE_BILLING_URL) or whether it runs there.`),
  billingAnswerUnreadable: (url: string) => new CliFailure("unexpected_answer", `Billing at ${url} gave an answer core cannot read.`),
  noPlatform: () =>
    new CliFailure("no_platform", "Your login names no platform, so there is no billing to show. Run core whoami to see it; operators name one with --platform <id>."),
  confirmationNeeded: (question: string, extra: Record<string, unknown>) =>
    new CliFailure(
      "confirmation_needed",
      `Nothing was changed: core asks before this (${question}), and standard input is not a terminal to answer on. Run it again with --yes to go ahead.`,
      extra,
    ),
  notConfirmed: (extra: Record<string, unknown>) => new CliFailure("not_confirmed", "Nothing was changed.", extra),
  notAPdf: (url: string, contentType: string) =>
    new CliFailure("unexpected_answer", `Billing at ${url} did not send a PDF (content type: ${contentType}). Nothing was written.`),

  // files the CLI writes (an invoice's PDF)
  fileExists: (path: string) => new CliFailure("file_exists", `${path} exists already. Nothing was written: choose another -o <file>, or overwrite it with --force.`),
  cannotWriteFile: (path: string, reason: string) => new CliFailure("cannot_write_file", `Cannot write ${path} (${reason}). Nothing was written.`),

  invalidArgument: (message: string) => new CliFailure("invalid_argument", `${message}.`),
  invalidDefinition: (message: string) => new CliFailure("invalid_definition", `${message}.`),

  // local problems
  damagedCredentials: (path: string, reason: string) =>
    new CliFailure("damaged_credentials", `The credential file ${path} cannot be read (${reason}). Run core login to replace it, or core logout to remove it.`),
  cannotWriteCredentials: (path: string, reason: string) =>
    new CliFailure("cannot_write_credentials", `Cannot write ${path} (${reason}). Set CORE_HOME to a directory you can write.`),
  credentialsBusy: (lockPath: string) =>
    new CliFailure("credentials_busy", `Another core process is refreshing the login (lock ${lockPath}). Try again; delete the lock file if it stays.`),
  invalidAddress: (server: string, value: string, from: string) =>
    new CliFailure("usage", `Invalid ${server} address "${value}" (from ${from}): expected http://host[:port] or https://host[:port].`),
  invalidSetting: (name: string, value: string, expected: string) => new CliFailure("usage", `${name} must be ${expected}, got "${value}".`),
  usage: (message: string, command?: string) => new CliFailure("usage", `${message}. Run: core ${command ? `${command} ` : ""}--help`),
  /** `typed` is not a command (of `group`, when given); `nearest` is the command it most likely meant */
  unknownCommand: (typed: string, nearest: string | null, group?: string) =>
    new CliFailure(
      "usage",
      `Unknown command "${group ? `${group} ` : ""}${typed}".${nearest ? ` Did you mean: core ${nearest}?` : ""} Run: core ${group ? `${group} ` : ""}--help`,
    ),
};

/** VALIDATION_ERROR names the failing fields in `details`, one `{ path, message }` each (DESIGN §3). */
function detailLines(details: unknown): string[] {
  if (!Array.isArray(details)) return [];
  return details.map((d) =>
    d && typeof d === "object" && ("path" in d || "message" in d)
      ? `  - ${[d.path, d.message].filter((part) => part !== undefined && part !== "").map(String).join(": ")}`
      : `  - ${JSON.stringify(d)}`,
  );
}

/** What an organization's policy asks of a held-back login (docs/vault/concepts/second-factors-and-policy.md): the policy, and the IAM page to open. */
export interface PolicyHold {
  policy: string;
  location: string;
}

/**
 * The policy in a refusal's details (`{ policy, orgId, location }`, the refusal every service gives
 * a held-back session), or null. IAM's own refusals name the page as a path on IAM: `iamUrl` makes
 * it an address to open; the other services give the address already.
 */
export function policyHoldOf(details: unknown, iamUrl?: string): PolicyHold | null {
  if (!details || typeof details !== "object") return null;
  const { policy, location } = details as { policy?: unknown; location?: unknown };
  if (typeof policy !== "string" || typeof location !== "string") return null;
  try {
    return { policy, location: new URL(location, iamUrl).href };
  } catch {
    return null;
  }
}

/** The one step out of a policy's hold: the page, then a new login (the held-back login never meets the policy later). */
export const policyStep = (hold: PolicyHold) =>
  `Open ${hold.location} to ${hold.policy === "SSO_REQUIRED" ? "sign in through your organization's single sign-on" : "set it up"}, then log in again: core login`;
