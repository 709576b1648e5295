import { sql } from "drizzle-orm";
import { readMigrationFiles } from "drizzle-orm/migrator";
import type { Db } from "./database.js";
import { rowsOf } from "./migrate.js";

/**
 * The readiness check of a service's database (DESIGN §10, `/health/ready`): resolves when the
 * database answers and every migration committed for `service` is recorded as applied
 * (`applyMigrations`), else throws saying what is missing. The folder is read once; each check is one
 * small query.
 */
export function databaseReadyCheck(db: Db, service: string, migrationsFolder: string): { name: "database"; check(): Promise<void> } {
  const expected = readMigrationFiles({ migrationsFolder }).map((migration) => migration.hash);
  return {
    name: "database",
    check: async () => {
      const rows = rowsOf<{ hash: string }>(await db.execute(sql`select hash from public.core_migrations where service = ${service}`));
      const applied = new Set(rows.map((row) => row.hash));
      const missing = expected.filter((hash) => !applied.has(hash)).length;
      if (missing > 0) throw new Error(`${missing} of ${expected.length} migrations of ${service} are not applied (npm run migrate)`);
    },
  };
}
