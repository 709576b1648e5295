import { index, jsonb, pgSchema, text, timestamp, uniqueIndex } from "drizzle-orm/pg-core";

/** The stack registry's tables, in its own Postgres schema (DESIGN §1-2). */
export const stacksSchema = pgSchema("stacks");

const at = (name: string) => timestamp(name, { withTimezone: true, precision: 3 }).notNull().defaultNow();

export const templates = stacksSchema.table(
  "templates",
  {
    id: text("id").primaryKey(),
    /** immutable once created (spec §4.5: PATCH has no name) */
    name: text("name").notNull(),
    displayName: text("display_name").notNull(),
    description: text("description").notNull(),
    /** "" when not given: the list item types them as plain strings (spec §2.8) */
    icon: text("icon").notNull().default(""),
    domain: text("domain").notNull().default(""),
    status: text("status", { enum: ["active", "deprecated"] }).notNull().default("active"),
    createdAt: at("created_at"),
    updatedAt: at("updated_at"),
  },
  (t) => [uniqueIndex("templates_name_key").on(t.name)],
);

export const versions = stacksSchema.table(
  "versions",
  {
    id: text("id").primaryKey(),
    templateId: text("template_id")
      .notNull()
      .references(() => templates.id, { onDelete: "cascade" }),
    version: text("version").notNull(),
    stackDefinition: jsonb("stack_definition").$type<Record<string, unknown>>().notNull(),
    coreSdkVersion: text("core_sdk_version").notNull(),
    status: text("status", { enum: ["active", "deprecated"] }).notNull().default("active"),
    publishedAt: at("published_at"),
    createdAt: at("created_at"),
  },
  (t) => [
    // published versions are immutable: the index makes the second of two racing publishes fail
    uniqueIndex("versions_template_version_key").on(t.templateId, t.version),
    index("versions_template_status_idx").on(t.templateId, t.status),
  ],
);

export type TemplateRow = typeof templates.$inferSelect;
export type VersionRow = typeof versions.$inferSelect;
