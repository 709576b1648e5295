import { pino, type DestinationStream, type Logger } from "pino";
import { ConfigError } from "./config.js";

export type { Logger };

/**
 * Structured JSON logs (DESIGN §3). Credentials never reach a log line: request logs carry the path
 * without its query string, and these keys are censored wherever they appear in a logged object,
 * down to four levels (`{ req: { headers: { authorization } } }` included).
 */
const SECRET_KEYS = [
  "password",
  "token",
  "key",
  "secret",
  "authorization",
  "cookie",
  "refreshToken",
  "refresh_token",
  "access_token",
  "device_code",
  "x-api-key",
];

// pino's `*.key` matches one level only, so each key is listed at every depth
const REDACT = SECRET_KEYS.flatMap((key) => {
  const field = /^[A-Za-z_$][\w$]*$/.test(key) ? `.${key}` : `["${key}"]`;
  return [0, 1, 2, 3].map((depth) => (depth === 0 ? field.replace(/^\./, "") : `*${".*".repeat(depth - 1)}${field}`));
});

/**
 * Path segments that are secrets: the password-reset token of `/api/auth/reset-password/<token>`
 * (the mailed link's first stop) and the invitation id of a mailed `/invitations/<id>` link and of
 * the invitation API. Magic-link, verification and device codes travel in query strings and
 * bodies, which are never logged.
 */
const SECRET_SEGMENT = /(\/(?:reset-password|invitations)\/)[^/]+/gi;

/** A request path as it may be logged: secret segments replaced by `[redacted]` (request lines, DESIGN §3). */
export const loggablePath = (path: string): string => path.replace(SECRET_SEGMENT, "$1[redacted]");

/** `destination` defaults to stdout; tests pass a stream to read what would be logged. */
export function createLogger(service: string, level = process.env.LOG_LEVEL || "info", destination?: DestinationStream): Logger {
  if (!(level in pino.levels.values) && level !== "silent") {
    throw new ConfigError(`LOG_LEVEL must be one of ${[...Object.keys(pino.levels.values), "silent"].join(", ")}; got "${level}"`);
  }
  // one of `npm start -- --replicas N`: its lines say which replica wrote them
  const replica = process.env.CORE_REPLICA;
  const base = replica ? { service, replica: Number(replica) } : { service };
  const options = { name: service, level, redact: { paths: REDACT, censor: "[redacted]" }, base };
  return destination ? pino(options, destination) : pino(options);
}

/** A logger that writes nowhere, for tests that do not look at logs. */
export const silentLogger = (): Logger => pino({ level: "silent" });
