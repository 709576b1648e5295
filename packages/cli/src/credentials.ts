import { mkdir, open, readFile, rename, rm, stat, unlink } from "node:fs/promises";
import { dirname, join } from "node:path";
import { failures } from "./failures.js";

/** The audience of every stored credential (spec §2.1, §5.6). */
export const AUDIENCE = "core-cli";

/** The credential record, `~/.core/credentials.json` (spec §2.1). */
export interface Credential {
  token: string;
  refreshToken: string | null;
  email: string;
  platformId: string | null;
  role: string;
  /** ISO 8601 */
  expiresAt: string;
  /** the IAM base address used at login; the token is only ever sent back there */
  iamUrl: string;
  audience: typeof AUDIENCE;
}

/** The stored credential, or null when there is none. A file that is not a credential is a failure. */
export async function readCredential(path: string): Promise<Credential | null> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw failures.damagedCredentials(path, (err as NodeJS.ErrnoException).code ?? String(err));
  }
  let record: Partial<Record<keyof Credential, unknown>>;
  try {
    record = JSON.parse(text);
  } catch {
    throw failures.damagedCredentials(path, "not JSON");
  }
  const missing = (["token", "email", "expiresAt", "iamUrl"] as const).filter((field) => typeof record?.[field] !== "string");
  if (missing.length > 0) throw failures.damagedCredentials(path, `no ${missing.join(", ")}`);
  if (Number.isNaN(Date.parse(record.expiresAt as string))) throw failures.damagedCredentials(path, "expiresAt is not a date");
  return record as Credential;
}

/**
 * Writes the credential atomically (spec §4.8, §8; DESIGN §5): a temporary file in the same
 * directory, created with mode 0600, flushed to disk, then renamed over the old file, so a reader
 * sees the old record or the new one, never half of one. The directory is created with mode 0700.
 */
export async function writeCredential(path: string, credential: Credential): Promise<void> {
  try {
    await writeAtomically(path, `${JSON.stringify(credential, null, 2)}\n`);
  } catch (err) {
    throw failures.cannotWriteCredentials(path, (err as Error).message);
  }
}

async function writeAtomically(path: string, content: string) {
  const directory = dirname(path);
  await mkdir(directory, { recursive: true, mode: 0o700 });
  // a name no one else uses; "wx" refuses to reuse one anyway (node:crypto would cost start-up time)
  const temporary = join(directory, `.credentials.${process.pid}.${Math.random().toString(36).slice(2, 10)}.tmp`);
  const file = await open(temporary, "wx", 0o600);
  try {
    try {
      await file.writeFile(content);
      await file.sync();
    } finally {
      await file.close();
    }
    await rename(temporary, path);
  } catch (err) {
    await rm(temporary, { force: true });
    throw err;
  }
  await syncDirectory(directory);
}

/** The rename itself reaches the disk only when the directory is flushed (POSIX; a no-op elsewhere). */
async function syncDirectory(directory: string) {
  try {
    const handle = await open(directory, "r");
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
  } catch {
    // Windows cannot open a directory; the rename is still atomic
  }
}

/** True when the file existed. */
export async function deleteCredential(path: string): Promise<boolean> {
  try {
    await unlink(path);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return false;
    throw err;
  }
}

export const hasExpired = (credential: Credential, now: number, marginMs = 0) => Date.parse(credential.expiresAt) - marginMs <= now;

/** A lock older than this was left by a process that died while refreshing. */
const STALE_LOCK_MS = 30_000;
const LOCK_WAIT_MS = 10_000;

/**
 * Runs `work` while holding `<credentials>.lock`, so two `core token` processes never spend the
 * same refresh token (IAM would take the second use for a stolen token and revoke the login).
 */
export async function withCredentialLock<T>(path: string, work: () => Promise<T>, sleep: (ms: number) => Promise<void>): Promise<T> {
  const lockPath = `${path}.lock`;
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  const giveUpAt = Date.now() + LOCK_WAIT_MS;
  for (;;) {
    try {
      await (await open(lockPath, "wx", 0o600)).close();
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      const age = await stat(lockPath).then((s) => Date.now() - s.mtimeMs, () => 0);
      if (age > STALE_LOCK_MS) await rm(lockPath, { force: true });
      else if (Date.now() > giveUpAt) throw failures.credentialsBusy(lockPath);
      else await sleep(50);
    }
  }
  try {
    return await work();
  } finally {
    await rm(lockPath, { force: true });
  }
}
