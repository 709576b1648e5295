import { and, asc, eq, inArray } from "drizzle-orm";
import { newId, type Clock } from "@core/kit";
import { isUniqueViolation, type Db } from "@core/storage";
import { templates, versions, type TemplateRow, type VersionRow } from "./db/schema.js";
import { templateDeprecated, templateExists, templateNotFound, versionExists, versionNotFound } from "./error-codes.js";
import { byPrecedenceDescending, latestOf } from "./semver.js";

/** The stack registry's rules, free of HTTP (spec §2.8-2.9, §3, §4.5; DESIGN §7). */

export interface NewTemplate {
  name: string;
  displayName: string;
  description: string;
  icon?: string;
  domain?: string;
}

export interface TemplateChanges {
  displayName?: string;
  description?: string;
  icon?: string;
  status?: "active" | "deprecated";
}

export interface NewVersion {
  version: string;
  stackDefinition: Record<string, unknown>;
  coreSdkVersion: string;
}

export type TemplateWithLatest = TemplateRow & { latestVersion: string | null };

export async function createTemplate(db: Db, clock: Clock, input: NewTemplate): Promise<TemplateRow> {
  const now = clock.now();
  try {
    const [row] = await db
      .insert(templates)
      .values({
        id: newId("tpl"),
        name: input.name,
        displayName: input.displayName,
        description: input.description,
        icon: input.icon ?? "",
        domain: input.domain ?? "",
        createdAt: now,
        updatedAt: now,
      })
      .returning();
    return row!;
  } catch (err) {
    if (isUniqueViolation(err, "templates_name_key")) throw templateExists(input.name);
    throw err;
  }
}

export async function findTemplate(db: Db, name: string): Promise<TemplateRow> {
  const [row] = await db.select().from(templates).where(eq(templates.name, name));
  if (!row) throw templateNotFound(name);
  return row;
}

/** Active templates by name, each with its latest version (spec §3: the list shows active ones only). */
export async function listActiveTemplates(db: Db): Promise<TemplateWithLatest[]> {
  const rows = await db.select().from(templates).where(eq(templates.status, "active")).orderBy(asc(templates.name));
  if (rows.length === 0) return [];
  const live = await db
    .select({ templateId: versions.templateId, version: versions.version, status: versions.status })
    .from(versions)
    .where(
      and(
        inArray(
          versions.templateId,
          rows.map((r) => r.id),
        ),
        eq(versions.status, "active"),
      ),
    );
  const byTemplate = new Map<string, typeof live>();
  for (const v of live) byTemplate.set(v.templateId, [...(byTemplate.get(v.templateId) ?? []), v]);
  return rows.map((row) => ({ ...row, latestVersion: latestOf(byTemplate.get(row.id) ?? [])?.version ?? null }));
}

export async function updateTemplate(db: Db, clock: Clock, name: string, changes: TemplateChanges): Promise<TemplateRow> {
  const [row] = await db
    .update(templates)
    .set({ ...changes, updatedAt: clock.now() })
    .where(eq(templates.name, name))
    .returning();
  if (!row) throw templateNotFound(name);
  return row;
}

/** Every version of a template, deprecated ones included, highest precedence first. */
export async function listVersions(db: Db, templateId: string): Promise<VersionRow[]> {
  return byPrecedenceDescending(await db.select().from(versions).where(eq(versions.templateId, templateId)));
}

export async function latestVersion(db: Db, templateId: string): Promise<VersionRow | null> {
  return latestOf(await db.select().from(versions).where(eq(versions.templateId, templateId))) ?? null;
}

export async function findVersion(db: Db, template: TemplateRow, version: string): Promise<VersionRow> {
  const [row] = await db
    .select()
    .from(versions)
    .where(and(eq(versions.templateId, template.id), eq(versions.version, version)));
  if (!row) throw versionNotFound(template.name, version);
  return row;
}

/**
 * Publishes a version. Versions are immutable (DESIGN §7): a second publish of the same version is
 * 409, and when two race, the unique index lets exactly one insert through.
 */
export async function publishVersion(db: Db, clock: Clock, template: TemplateRow, input: NewVersion): Promise<VersionRow> {
  if (template.status === "deprecated") throw templateDeprecated(template.name);
  const now = clock.now();
  try {
    const [row] = await db
      .insert(versions)
      .values({
        id: newId("ver"),
        templateId: template.id,
        version: input.version,
        stackDefinition: input.stackDefinition,
        coreSdkVersion: input.coreSdkVersion,
        publishedAt: now,
        createdAt: now,
      })
      .returning();
    return row!;
  } catch (err) {
    if (isUniqueViolation(err, "versions_template_version_key")) throw versionExists(template.name, input.version);
    throw err;
  }
}

/** Deprecates a version (spec §3); it stays readable, and deprecating it again changes nothing. */
export async function deprecateVersion(db: Db, template: TemplateRow, version: string): Promise<void> {
  const [row] = await db
    .update(versions)
    .set({ status: "deprecated" })
    .where(and(eq(versions.templateId, template.id), eq(versions.version, version)))
    .returning({ id: versions.id });
  if (!row) throw versionNotFound(template.name, version);
}
