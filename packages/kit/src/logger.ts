import { pino, type Logger } from "pino";

export type { Logger };

/**
 * Structured JSON logs (DESIGN §3). Credentials never reach a log line: request logs carry the path
 * without its query string, and these keys are censored wherever they appear in a logged object.
 */
const REDACT = [
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
  "*.password",
  "*.token",
  "*.key",
  "*.secret",
  "*.authorization",
  "*.cookie",
  "headers.authorization",
  "headers.cookie",
  'headers["x-api-key"]',
];

export function createLogger(service: string, level = process.env.LOG_LEVEL ?? "info"): Logger {
  return pino({
    name: service,
    level,
    redact: { paths: REDACT, censor: "[redacted]" },
    base: { service },
  });
}

/** A logger that writes nowhere, for tests that do not look at logs. */
export const silentLogger = (): Logger => pino({ level: "silent" });
