import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { silentLogger, type ServiceName } from "@core/kit";
import { runServices, type ServiceModule } from "@core/launcher";
import { DataDirLockedError, openDatabase } from "@core/storage";
import { freePort } from "../../../services/iam/test/support/harness.js";

/**
 * runServices with stand-in services (real migrations, a real data directory, real ports): the
 * order of opening the database, loading code and starting services that `npm start` relies on.
 */
const scratch = mkdtempSync(join(tmpdir(), "core-launcher-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
let n = 0;

const MIGRATIONS = fileURLToPath(new URL("../../../services/platform-registry/drizzle", import.meta.url));
const answering = (text: string) => ({ fetch: () => new Response(text), close: async () => {} });
const withTables = (text: string): ServiceModule => ({ SERVICE_ID: text, migrationsFolder: MIGRATIONS, buildService: async () => answering(text) });
const withoutTables = (text: string, build = async () => answering(text)): ServiceModule => ({ SERVICE_ID: text, migrationsFolder: undefined, buildService: build });

async function setting() {
  const dataDir = join(scratch, `data-${n++}`);
  const [registry, vault] = [await freePort(), await freePort()];
  const env = { CORE_DATA_DIR: dataDir, CORE_PLATFORM_REGISTRY_PORT: String(registry), CORE_VAULT_PORT: String(vault) };
  return { dataDir, env, lock: join(dataDir, "core.lock") };
}

/** The data directory is free again: another process could open it. */
async function released(dataDir: string) {
  const again = await openDatabase({ dataDir });
  await again.close();
  return true;
}

describe("runServices", { timeout: 60_000 }, () => {
  it("with lazily loaded services, the database opens (its lock is taken) while their code loads; all start, in the order asked", async () => {
    const { dataDir, env, lock } = await setting();
    let lockedBeforeLoad = false;
    const running = await runServices(
      {
        services: {
          withTables: true,
          load: async (): Promise<[ServiceName, ServiceModule][]> => {
            // while the code "loads", the database's open goes on: its lock appears (were the open
            // to wait for the load, it never would, and this would give up after 5 s)
            const deadline = Date.now() + 5_000;
            while (!existsSync(lock) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
            lockedBeforeLoad = existsSync(lock);
            return [
              ["vault", withoutTables("vault")],
              ["platform-registry", withTables("registry")],
            ];
          },
        },
        builtInCredentials: true,
        env,
      },
      silentLogger(),
    );
    try {
      expect(lockedBeforeLoad).toBe(true);
      expect(Object.keys(running.urls)).toEqual(["vault", "platform-registry"]);
      expect(await (await fetch(`http://127.0.0.1:${env.CORE_PLATFORM_REGISTRY_PORT}/`)).text()).toBe("registry");
      expect(await (await fetch(`http://127.0.0.1:${env.CORE_VAULT_PORT}/`)).text()).toBe("vault");
    } finally {
      await running.stop();
    }
    expect(await released(dataDir)).toBe(true);
  });

  it("when the code fails to load, the database that began to open is closed and its lock released", async () => {
    const { dataDir, env } = await setting();
    const failing = runServices(
      {
        services: {
          withTables: true,
          load: async () => {
            throw new Error("a module failed to evaluate");
          },
        },
        builtInCredentials: true,
        env,
      },
      silentLogger(),
    );
    await expect(failing).rejects.toThrow("a module failed to evaluate");
    expect(await released(dataDir)).toBe(true);
  });

  it("refuses services announced without tables that have them: nothing is opened or locked", async () => {
    const { dataDir, env, lock } = await setting();
    const refused = runServices(
      { services: { withTables: false, load: async () => [["platform-registry", withTables("registry")]] }, builtInCredentials: true, env },
      silentLogger(),
    );
    await expect(refused).rejects.toThrow("platform-registry have tables, but were announced without (LazyServices.withTables)");
    expect(existsSync(lock)).toBe(false);
    expect(existsSync(join(dataDir, "pgdata"))).toBe(false);
  });

  it("a table-less service that fails while the database opens: the error comes out, and the database is closed", async () => {
    const { dataDir, env } = await setting();
    const failing = runServices(
      {
        services: [
          ["vault", withoutTables("vault", async () => Promise.reject(new Error("the vault folder is gone")))],
          ["platform-registry", withTables("registry")],
        ],
        builtInCredentials: true,
        env,
      },
      silentLogger(),
    );
    await expect(failing).rejects.toThrow("the vault folder is gone");
    expect(await released(dataDir)).toBe(true);
  });

  it("a data directory in use wins over everything else: DataDirLockedError, and the table-less service started meanwhile is stopped", async () => {
    const { dataDir, env } = await setting();
    const holder = await openDatabase({ dataDir });
    try {
      const refused = runServices(
        {
          services: [
            ["vault", withoutTables("vault")],
            ["platform-registry", withTables("registry")],
          ],
          builtInCredentials: true,
          env,
        },
        silentLogger(),
      );
      await expect(refused).rejects.toBeInstanceOf(DataDirLockedError);
      // the vault's port is free again
      await expect(fetch(`http://127.0.0.1:${env.CORE_VAULT_PORT}/`)).rejects.toThrow();
    } finally {
      await holder.close();
    }
  });
});
