import { pino, type DestinationStream, type Logger, type LoggerOptions } from "pino";
import { ConfigError } from "./config.js";
import { isSecretName, namesAnError, REDACTED, redactText } from "./redaction.js";

export type { Logger };

/**
 * Structured JSON logs (DESIGN §3). Credentials never reach a log line
 * (docs/vault/cross-cutting/security.md#Logs): every logged object is walked before it is written,
 * at any depth, and the value of each key that names a secret (`password`, `token`, `cookie`,
 * `code`, `state`, `backupCodes` … `isSecretName` in ./redaction.ts) is censored, and each string,
 * the message too, loses what looks like a credential (`redactText`). Request lines carry the
 * path without its query string, redacted by the same rule (`loggablePath`).
 */
function censored(value: unknown, name: string | undefined, depth: number): unknown {
  if (name !== undefined && isSecretName(name) && value !== null && value !== undefined && value !== "" && !namesAnError(name, value)) return REDACTED;
  if (typeof value === "string") return redactText(value);
  if (typeof value !== "object" || value === null) return value;
  // deeper than any line of ours: a library's object, or a cycle
  if (depth > MAX_DEPTH) return "[too deep to log]";
  if (Array.isArray(value)) {
    let copy: unknown[] | undefined;
    value.forEach((item, i) => {
      const kept = censored(item, undefined, depth + 1);
      if (kept !== item) (copy ??= [...value])[i] = kept;
    });
    return copy ?? value;
  }
  if (value instanceof Error) return censoredFields(errorFields(value), depth);
  // what JSON would write for it: a URL its address, a Date its time
  const toJSON = (value as { toJSON?: () => unknown }).toJSON;
  if (typeof toJSON === "function") return censored(toJSON.call(value), undefined, depth + 1);
  return censoredFields(value as Record<string, unknown>, depth);
}

const MAX_DEPTH = 12;

function censoredFields(fields: Record<string, unknown>, depth: number): Record<string, unknown> {
  let copy: Record<string, unknown> | undefined;
  for (const key in fields) {
    const value = fields[key];
    const kept = censored(value, key, depth + 1);
    if (kept !== value) (copy ??= { ...fields })[key] = kept;
  }
  return copy ?? fields;
}

/** An error's message, stack and cause, which are not enumerable, with its own enumerable fields. */
const errorFields = (err: Error): Record<string, unknown> => ({
  ...err,
  type: err.name,
  message: err.message,
  stack: err.stack,
  ...(err.cause !== undefined ? { cause: err.cause } : {}),
});

/** `destination` defaults to stdout; tests pass a stream to read what would be logged. */
export function createLogger(service: string, level = process.env.LOG_LEVEL || "info", destination?: DestinationStream): Logger {
  if (!(level in pino.levels.values) && level !== "silent") {
    throw new ConfigError(`LOG_LEVEL must be one of ${[...Object.keys(pino.levels.values), "silent"].join(", ")}; got "${level}"`);
  }
  // one of `npm start -- --replicas N`: its lines say which replica wrote them
  const replica = process.env.CORE_REPLICA;
  const base = replica ? { service, replica: Number(replica) } : { service };
  const options: LoggerOptions = {
    name: service,
    level,
    base,
    formatters: { log: (object) => censored(object, undefined, 0) as Record<string, unknown> },
    hooks: {
      // the message (and any text interpolated into it); `args` is pino's own copy of the call's arguments
      logMethod(args, method) {
        for (let i = 0; i < args.length; i++) if (typeof args[i] === "string") args[i] = redactText(args[i] as string);
        return method.apply(this, args);
      },
    },
  };
  return destination ? pino(options, destination) : pino(options);
}

/** A logger that writes nowhere, for tests that do not look at logs. */
export const silentLogger = (): Logger => pino({ level: "silent" });
