import { and, asc, eq, gt, or, sql } from "drizzle-orm";
import { ApiError, type Clock, conflict, decodeCursor, newId, resourceNotFound, toPage } from "@core/kit";
import { isUniqueViolation, ReadBatcher, keysetAfter, keysetOrder, type Db, type KeysetColumns } from "@core/storage";
import { platforms, stacks, type PlatformRow, type StackRow } from "./db/schema.js";

/** The platform registry's rules, free of HTTP (DESIGN §7, spec §2.10). */

export interface NewPlatform {
  name: string;
  slug: string;
  tier: string;
  hostAccountId?: string;
  repoName?: string;
}

export interface PlatformChanges {
  name?: string;
  tier?: string;
  hostAccountId?: string | null;
  repoName?: string | null;
  status?: "active" | "suspended";
}

export interface NewStack {
  tenantId: string;
  name: string;
  isDefault: boolean;
  templateId?: string;
  repoName?: string;
}

export interface StackChanges {
  name?: string;
  isDefault?: boolean;
  templateId?: string | null;
  repoName?: string | null;
  status?: "active" | "archived";
}

export const platformSuspended = () =>
  new ApiError(403, "PLATFORM_SUSPENDED", "This platform is suspended; it can be read but not changed");

const position = (row: { createdAt: Date; id: string }) => ({ k: row.createdAt, id: row.id });
const OLDEST_FIRST = { key: "timestamp", tie: "id" } as const;
const platformOrder: KeysetColumns = { key: platforms.createdAt, tie: platforms.id, direction: "asc" };
const stackOrder: KeysetColumns = { key: stacks.createdAt, tie: stacks.id, direction: "asc" };

export async function createPlatform(db: Db, clock: Clock, input: NewPlatform): Promise<PlatformRow> {
  const now = clock.now();
  try {
    const [row] = await db
      .insert(platforms)
      .values({
        id: newId("plt"),
        name: input.name,
        slug: input.slug,
        tier: input.tier,
        hostAccountId: input.hostAccountId ?? null,
        repoName: input.repoName ?? null,
        createdAt: now,
        updatedAt: now,
      })
      .returning();
    return row!;
  } catch (err) {
    if (isUniqueViolation(err, "platforms_slug_key")) throw conflict("SLUG_TAKEN", `The slug "${input.slug}" is taken`);
    throw err;
  }
}

/**
 * Platforms by id, the registry's most frequent read (a member's own platform, every authorized
 * route): the ids asked for in one turn of the event loop are read together (ReadBatcher), by a
 * named prepared statement that PostgreSQL parses and plans once per connection (ADR 0005).
 */
const byIdBatchers = new WeakMap<Db, ReadBatcher<string, PlatformRow>>();
function platformById(db: Db, id: string): Promise<PlatformRow | undefined> {
  let batcher = byIdBatchers.get(db);
  if (!batcher) {
    const statement = db
      .select()
      .from(platforms)
      .where(sql`${platforms.id} = any(${sql.placeholder("ids")}::text[])`)
      .prepare("registry_platforms_by_id");
    batcher = new ReadBatcher(async (ids) => new Map((await statement.execute({ ids })).map((row) => [row.id, row])));
    byIdBatchers.set(db, batcher);
  }
  return batcher.load(id);
}

export async function findPlatform(db: Db, id: string): Promise<PlatformRow> {
  const row = await platformById(db, id);
  if (!row) throw resourceNotFound("platform");
  return row;
}

export async function listPlatforms(db: Db, page: { limit: number; cursor?: string; onlyId?: string; slug?: string }) {
  // a member sees one platform at most: its first page is that platform's row
  if (page.onlyId && !page.cursor && !page.slug) {
    const own = await platformById(db, page.onlyId);
    return toPage(own ? [own] : [], page.limit, position);
  }
  const rows = await db
    .select()
    .from(platforms)
    .where(and(keysetAfter(platformOrder, decodeCursor(page.cursor, OLDEST_FIRST)), page.onlyId ? eq(platforms.id, page.onlyId) : undefined, page.slug ? eq(platforms.slug, page.slug) : undefined))
    .orderBy(...keysetOrder(platformOrder))
    .limit(page.limit + 1);
  return toPage(rows, page.limit, position);
}

export async function updatePlatform(db: Db, clock: Clock, id: string, changes: PlatformChanges): Promise<PlatformRow> {
  const [row] = await db
    .update(platforms)
    .set({ ...changes, updatedAt: clock.now() })
    .where(eq(platforms.id, id))
    .returning();
  if (!row) throw resourceNotFound("platform");
  return row;
}

/** Refuses changes to a suspended platform's data (spec §3: suspension keeps reads, stops writes). */
export async function requireWritablePlatform(db: Db, id: string): Promise<PlatformRow> {
  const platform = await findPlatform(db, id);
  if (platform.status === "suspended") throw platformSuspended();
  return platform;
}

export async function listStacks(db: Db, platformId: string, page: { limit: number; cursor?: string }) {
  const rows = await db
    .select()
    .from(stacks)
    .where(and(eq(stacks.platformId, platformId), keysetAfter(stackOrder, decodeCursor(page.cursor, OLDEST_FIRST))))
    .orderBy(...keysetOrder(stackOrder))
    .limit(page.limit + 1);
  return toPage(rows, page.limit, position);
}

export async function findStack(db: Db, platformId: string, stackId: string): Promise<StackRow> {
  const [row] = await db
    .select()
    .from(stacks)
    .where(and(eq(stacks.platformId, platformId), eq(stacks.id, stackId)));
  if (!row) throw resourceNotFound("stack");
  return row;
}

const stackNameTaken = (name: string) => conflict("STACK_NAME_TAKEN", `The tenant already has a stack named "${name}"`);

/**
 * Creates a stack. Making it the default clears the platform's previous default in the same
 * transaction; the partial unique index keeps "at most one default" true even under races.
 */
export async function createStack(db: Db, clock: Clock, platformId: string, input: NewStack): Promise<StackRow> {
  const now = clock.now();
  try {
    return await db.transaction(async (tx) => {
      await lockPlatform(tx as unknown as Db, platformId);
      if (input.isDefault) await clearDefault(tx as unknown as Db, platformId, now);
      const [row] = await tx
        .insert(stacks)
        .values({
          id: newId("stk"),
          platformId,
          tenantId: input.tenantId,
          name: input.name,
          isDefault: input.isDefault,
          templateId: input.templateId ?? null,
          repoName: input.repoName ?? null,
          createdAt: now,
          updatedAt: now,
        })
        .returning();
      return row!;
    });
  } catch (err) {
    if (isUniqueViolation(err, "stacks_name_per_tenant")) throw stackNameTaken(input.name);
    throw err;
  }
}

export async function updateStack(db: Db, clock: Clock, platformId: string, stackId: string, changes: StackChanges): Promise<StackRow> {
  const now = clock.now();
  try {
    return await db.transaction(async (tx) => {
      await lockPlatform(tx as unknown as Db, platformId);
      const current = await findStack(tx as unknown as Db, platformId, stackId);
      if (changes.isDefault && !current.isDefault) await clearDefault(tx as unknown as Db, platformId, now);
      const [row] = await tx
        .update(stacks)
        .set({ ...changes, updatedAt: now })
        .where(and(eq(stacks.platformId, platformId), eq(stacks.id, stackId)))
        .returning();
      return row!;
    });
  } catch (err) {
    if (changes.name && isUniqueViolation(err, "stacks_name_per_tenant")) throw stackNameTaken(changes.name);
    throw err;
  }
}

export async function deleteStack(db: Db, platformId: string, stackId: string): Promise<void> {
  const deleted = await db
    .delete(stacks)
    .where(and(eq(stacks.platformId, platformId), eq(stacks.id, stackId)))
    .returning({ id: stacks.id });
  if (deleted.length === 0) throw resourceNotFound("stack");
}

/** serialises default changes per platform: concurrent "make me default" calls take turns */
async function lockPlatform(tx: Db, platformId: string) {
  const [row] = await tx.execute<{ id: string }>(sql`select id from registry.platforms where id = ${platformId} for update`).then(
    (r) => (r as unknown as { rows: { id: string }[] }).rows,
  );
  if (!row) throw resourceNotFound("platform");
}

async function clearDefault(tx: Db, platformId: string, now: Date) {
  await tx
    .update(stacks)
    .set({ isDefault: false, updatedAt: now })
    .where(and(eq(stacks.platformId, platformId), eq(stacks.isDefault, true)));
}
