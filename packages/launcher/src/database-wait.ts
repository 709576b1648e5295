import { openDatabase, type DatabaseConfig, type DatabaseHandle } from "@core/storage";

/**
 * Why start-up cannot use its database, as one sentence for the operator (DESIGN §10): printed
 * after `core: `, without a stack, and never with the credentials of `DATABASE_URL`.
 */
export class DatabaseUnavailableError extends Error {
  override name = "DatabaseUnavailableError";
}

/** Socket errors of a server that is not reachable (yet): start-up waits for these. */
const UNREACHABLE: Record<string, string> = {
  ECONNREFUSED: "connection refused",
  ECONNRESET: "connection reset",
  ETIMEDOUT: "no answer in time",
  EHOSTUNREACH: "host unreachable",
  ENETUNREACH: "network unreachable",
  // a container's name resolves once that container runs
  ENOTFOUND: "host name not found",
  EAI_AGAIN: "host name lookup failed",
  // a Unix socket appears when the server starts
  ENOENT: "no socket file",
  EPIPE: "connection closed",
};
/** SQLSTATEs of a server that is there but not taking connections yet: starting, stopping, full. */
const NOT_YET = new Set(["57P01", "57P02", "57P03", "53300"]);
/** node-postgres's own words for a connection that ended or timed out before it was made. */
const CUT_OFF = /Connection terminated|timeout expired|connection timeout/i;

/** What went wrong connecting: a reason in a few words, and whether a later try may mend it. */
export interface ConnectFailure {
  reason: string;
  /** the server did not answer (down, starting, unreachable); otherwise it answered no */
  waitable: boolean;
  /** SQLSTATE when the server answered */
  sqlState?: string;
}

/** The errors under drizzle's and Node's wrappers (`cause`, AggregateError's `errors`). */
function causes(err: unknown): { code?: unknown; syscall?: unknown; message?: unknown }[] {
  const found: { code?: unknown; syscall?: unknown; message?: unknown }[] = [];
  const visit = (value: unknown, depth: number) => {
    if (!value || typeof value !== "object" || depth > 5) return;
    const error = value as { cause?: unknown; errors?: unknown };
    found.push(value as never);
    visit(error.cause, depth + 1);
    if (Array.isArray(error.errors)) for (const each of error.errors) visit(each, depth + 1);
  };
  visit(err, 0);
  return found;
}

/** Whether `err` is a failure to reach or enter the database, and which kind; null for anything else. */
export function connectFailure(err: unknown): ConnectFailure | null {
  for (const cause of causes(err)) {
    const code = typeof cause.code === "string" ? cause.code : undefined;
    const message = typeof cause.message === "string" ? cause.message : "";
    // ENOENT is also a missing file: only a socket's counts
    if (code && UNREACHABLE[code] && (code !== "ENOENT" || cause.syscall === "connect")) return { reason: UNREACHABLE[code]!, waitable: true };
    if (code && /^[0-9A-Z]{5}$/.test(code)) {
      if (NOT_YET.has(code)) return { reason: message || code, waitable: true, sqlState: code };
      // the SQLSTATEs of connecting: class 08 (connection exception) is waited for, 28 and 3D are not
      if (/^(08|28|3D)/.test(code)) return { reason: message, waitable: code.startsWith("08"), sqlState: code };
    }
    if (CUT_OFF.test(message)) return { reason: "the connection ended before it was made", waitable: true };
  }
  return null;
}

/** `host:port` (or the socket directory) of a PostgreSQL URL, without the user name or password. */
export function databaseAddress(url: string): string {
  try {
    const parsed = new URL(url);
    const host = parsed.hostname || parsed.searchParams.get("host") || "localhost";
    return host.startsWith("/") ? host : `${host}:${parsed.port || "5432"}`;
  } catch {
    return "DATABASE_URL";
  }
}

/** The sentence for a database that answered no: a wrong password or a missing database is not waited for. */
function refusal(where: string, url: string, failure: ConnectFailure): string {
  switch (failure.sqlState) {
    case "28P01":
      return `the database at ${where} refused the password in DATABASE_URL`;
    case "28000":
      // PostgreSQL's message names the user; ours does not
      return `the database at ${where} refused the user in DATABASE_URL (no such role, or no pg_hba.conf entry lets it in)`;
    case "3D000": {
      const name = decodeURIComponent(new URL(url).pathname.slice(1)) || "postgres";
      return `the database at ${where} has no database "${name}"; create it, or name another in DATABASE_URL`;
    }
    default:
      return `the database at ${where} refused the connection: ${failure.reason} (SQLSTATE ${failure.sqlState})`;
  }
}

/**
 * The sentence for a PostgreSQL server that answered and then went away (while migrations were
 * applied), or null when `err` is something else.
 */
export function databaseLost(err: unknown, url: string | undefined, during: string): DatabaseUnavailableError | null {
  const failure = url ? connectFailure(err) : null;
  if (!failure?.waitable) return null;
  return new DatabaseUnavailableError(`the database at ${databaseAddress(url!)} stopped answering ${during} (${failure.reason}); start it, or check DATABASE_URL`);
}

export interface DatabaseWait {
  /** how long to keep trying; 0: one try */
  seconds: number;
  /** one line per failed try */
  say: (line: string) => void;
}

/**
 * `openDatabase`, waiting for a PostgreSQL server that does not answer yet (DESIGN §10): tries again
 * after 1, 2, 4 … s (at most 10 s) until `wait.seconds` have passed, saying so once per try; then,
 * or at once for a server that answered no, a DatabaseUnavailableError with one sentence. The
 * embedded database is opened as it is: there is nothing to wait for.
 */
export async function openDatabaseWhenUp(config: DatabaseConfig, wait: DatabaseWait): Promise<DatabaseHandle> {
  const url = config.url;
  if (!url) return openDatabase(config);
  const where = databaseAddress(url);
  const began = Date.now();
  for (let attempt = 1; ; attempt++) {
    try {
      return await openDatabase(config);
    } catch (err) {
      const failure = connectFailure(err);
      if (!failure) throw new DatabaseUnavailableError(`the database at ${where} could not be opened: ${(err as Error).message}`);
      if (!failure.waitable) throw new DatabaseUnavailableError(refusal(where, url, failure));
      const waited = (Date.now() - began) / 1000;
      const left = wait.seconds - waited;
      // a wait always tries twice at least: a first try slowed past the whole wait (a loaded machine) is not a wait
      if (left <= 0 && (wait.seconds === 0 || attempt > 1)) {
        const how = wait.seconds === 0 ? "is not answering" : `did not answer within ${wait.seconds} s`;
        throw new DatabaseUnavailableError(`the database at ${where} ${how} (${failure.reason}); start it, or check DATABASE_URL and CORE_DB_WAIT_SECONDS`);
      }
      const delay = Math.max(1, Math.min(2 ** (attempt - 1), 10, Math.ceil(left)));
      wait.say(`core: the database at ${where} is not answering (${failure.reason}); trying again in ${delay} s (${Math.round(waited)} s of ${wait.seconds})`);
      await new Promise((resolve) => setTimeout(resolve, delay * 1000));
    }
  }
}
