import { sql } from "drizzle-orm";
import { boolean, index, pgSchema, text, timestamp, uniqueIndex } from "drizzle-orm/pg-core";

/** The platform registry's tables, in its own Postgres schema (DESIGN §2). */
export const registry = pgSchema("registry");

const at = (name: string) => timestamp(name, { withTimezone: true, precision: 3 }).notNull().defaultNow();

export const platforms = registry.table(
  "platforms",
  {
    id: text("id").primaryKey(),
    name: text("name").notNull(),
    slug: text("slug").notNull(),
    status: text("status", { enum: ["active", "suspended"] }).notNull().default("active"),
    tier: text("tier").notNull(),
    hostAccountId: text("host_account_id"),
    repoName: text("repo_name"),
    createdAt: at("created_at"),
    updatedAt: at("updated_at"),
  },
  (t) => [uniqueIndex("platforms_slug_key").on(t.slug), index("platforms_page_idx").on(t.createdAt, t.id)],
);

export const stacks = registry.table(
  "stacks",
  {
    id: text("id").primaryKey(),
    platformId: text("platform_id")
      .notNull()
      .references(() => platforms.id, { onDelete: "cascade" }),
    tenantId: text("tenant_id").notNull(),
    name: text("name").notNull(),
    isDefault: boolean("is_default").notNull().default(false),
    templateId: text("template_id"),
    repoName: text("repo_name"),
    status: text("status", { enum: ["active", "archived"] }).notNull().default("active"),
    createdAt: at("created_at"),
    updatedAt: at("updated_at"),
  },
  (t) => [
    // at most one default stack per platform, held by the database itself
    uniqueIndex("stacks_one_default_per_platform").on(t.platformId).where(sql`${t.isDefault}`),
    uniqueIndex("stacks_name_per_tenant").on(t.platformId, t.tenantId, t.name),
    index("stacks_page_idx").on(t.platformId, t.createdAt, t.id),
  ],
);

export type PlatformRow = typeof platforms.$inferSelect;
export type StackRow = typeof stacks.$inferSelect;
