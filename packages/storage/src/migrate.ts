import { sql } from "drizzle-orm";
import { readMigrationFiles } from "drizzle-orm/migrator";
import type { Db } from "./database.js";

/**
 * Applies a service's committed drizzle-kit migrations (DESIGN §2). Every service records what it
 * applied in one table, keyed by service, and all of it happens in one transaction under a
 * transaction-scoped advisory lock, so replicas starting together never race: the second waits,
 * then finds nothing left to do.
 */
export async function applyMigrations(db: Db, service: string, migrationsFolder: string): Promise<number> {
  const migrations = readMigrationFiles({ migrationsFolder });
  return db.transaction(async (tx) => {
    await tx.execute(sql`select pg_advisory_xact_lock(hashtext('core:migrations'))`);
    await tx.execute(sql`create table if not exists public.core_migrations (
      service text not null,
      hash text not null,
      created_at bigint not null,
      applied_at timestamptz not null default now(),
      primary key (service, hash)
    )`);
    const applied = await tx.execute<{ hash: string }>(
      sql`select hash from public.core_migrations where service = ${service}`,
    );
    const done = new Set(rowsOf<{ hash: string }>(applied).map((r) => r.hash));
    let count = 0;
    for (const migration of migrations) {
      if (done.has(migration.hash)) continue;
      for (const statement of migration.sql) {
        if (statement.trim()) await tx.execute(sql.raw(statement));
      }
      await tx.execute(
        sql`insert into public.core_migrations (service, hash, created_at) values (${service}, ${migration.hash}, ${migration.folderMillis})`,
      );
      count++;
    }
    return count;
  });
}

/** node-postgres answers `{ rows }`, PGlite answers `{ rows }` too, but typed apart. */
export function rowsOf<T>(result: unknown): T[] {
  return ((result as { rows?: T[] }).rows ?? (result as T[])) as T[];
}
