import lockfile from "proper-lockfile";
import { join } from "node:path";

export class DataDirLockedError extends Error {
  constructor(readonly dataDir: string) {
    super(
      `The data directory ${dataDir} is in use by another core process. ` +
        `Stop that process first, or give this one its own directory with CORE_DATA_DIR.`,
    );
    this.name = "DataDirLockedError";
  }
}

/**
 * The embedded database has no lock of its own, and two processes on one PGlite directory silently
 * lose writes (DESIGN §2), so the process holds an exclusive lock on the directory while it runs.
 * The lock is refreshed every few seconds; a crashed holder's lock goes stale after 15 s.
 */
export async function lockDataDir(dataDir: string): Promise<() => Promise<void>> {
  try {
    return await lockfile.lock(dataDir, {
      lockfilePath: join(dataDir, "core.lock"),
      stale: 15_000,
      update: 5_000,
      retries: 0,
      realpath: false,
      onCompromised: (err) => {
        // another process took the directory: stop writing at once rather than corrupt it
        console.error(`core: lost the lock on ${dataDir}: ${err.message}`);
        process.exit(1);
      },
    });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ELOCKED") throw new DataDirLockedError(dataDir);
    throw err;
  }
}
