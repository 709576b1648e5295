import { isAPIError } from "better-auth/api";
import { loggableError, type Logger } from "@core/kit";

type Level = "debug" | "info" | "warn" | "error";

/** The library's lines about input it refused, some with the client's own text after the colon. */
const REFUSED_INPUT: { pattern: RegExp; says: string }[] = [
  { pattern: /^Invalid (callbackURL|redirectURL|errorCallbackURL|newUserCallbackURL)\b/, says: "the auth library refused a $1 the client sent" },
  { pattern: /^Invalid origin\b/, says: "the auth library refused an untrusted Origin" },
  { pattern: /^If it's a valid URL, please add/, says: "" },
  { pattern: /^Blocked cross-site navigation login attempt/, says: "the auth library refused a cross-site sign-in form" },
  { pattern: /^(User not found|Password not found|Invalid password|Reset Password: User not found|Email is the same)$/, says: "the auth library refused a sign-in or reset: $1" },
  // the passkey plugin's verifier rejected what the browser sent (another origin, a bad signature), with its text in the error
  { pattern: /^Failed to verify (registration|authentication)$/, says: "the passkey plugin refused a $1 the client sent" },
  { pattern: /^Failed to parse state$/, says: "the auth library refused a sign-in callback whose state it did not give this browser" },
];

/**
 * A line of the auth library's log, as our logger writes it. The library logs at error level what
 * is the client's mistake (a wrong API key, a callbackURL or Origin it refused, a cross-site form),
 * often with the client's text in the message. Input we refused is not our failure, and an
 * operator's alerts must not fire on it: such lines go at info (debug for wrong API keys, which come
 * by the thousand) in our words, without the client's text. Every other line keeps its level and
 * message, its errors stripped of query parameters.
 */
export function libraryLogLine(level: Level, message: string, args: unknown[]): { level: Level; message: string; details?: unknown[] } | null {
  for (const { pattern, says } of REFUSED_INPUT) {
    const match = pattern.exec(message);
    if (match) return says ? { level: "info", message: says.replace("$1", match[1] ?? "") } : null;
  }
  const refusal = args.find((a) => isAPIError(a) && Number(a.statusCode) < 500) as { body?: { code?: string } } | undefined;
  if (refusal) return { level: "debug", message: `the auth library refused the request: ${message.replace(/:$/, "")}`, details: [{ code: refusal.body?.code ?? null }] };
  return { level, message, details: args.map((a) => (a instanceof Error ? loggableError(a) : a)) };
}

/** The library's logger option: its lines through ours (libraryLogLine). */
export const libraryLogger = (logger: Logger) => ({
  level: "warn" as const,
  log: (level: Level, message: string, ...args: unknown[]) => {
    const line = libraryLogLine(level, message, args);
    if (line) logger[line.level]({ library: "better-auth", ...(line.details ? { details: line.details } : {}) }, line.message);
  },
});
