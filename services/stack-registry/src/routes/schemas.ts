import { z } from "@hono/zod-openapi";
import { unixSeconds } from "@core/kit";
import type { TemplateRow, VersionRow } from "../db/schema.js";
import { MAX_VERSION_LENGTH, SEMVER_PATTERN, STRICT_SEMVER_PATTERN } from "../semver.js";

/** Limits of spec §8, and ours where the spec gives none (ADR 0010). */
export const LIMITS = {
  name: 64,
  displayName: 128,
  description: 1024,
  icon: 2048,
  domain: 128,
  /** bytes of the serialized stackDefinition; the whole body stays under the kit's 1 MiB */
  definitionBytes: 256 * 1024,
} as const;

export const TemplateName = z
  .string()
  .min(1)
  .max(LIMITS.name)
  .regex(/^[a-z0-9-]+$/, "lowercase letters, digits and hyphens only");

/** the spec §9 pattern, which semver.org's own rules narrow further (src/semver.ts) */
export const VersionString = z
  .string()
  .max(MAX_VERSION_LENGTH)
  .regex(SEMVER_PATTERN, "a semantic version: MAJOR.MINOR.PATCH with an optional -pre-release")
  .openapi({
    pattern: STRICT_SEMVER_PATTERN.source,
    description: "semver.org: MAJOR.MINOR.PATCH with an optional -pre-release; no leading zeros, no empty identifiers, numbers at most 2^53-1",
  });

/** Spec §2.8, integer timestamps in Unix seconds (DESIGN §2). */
export const StackTemplateSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    display_name: z.string(),
    description: z.string(),
    icon: z.string().openapi({ description: '"" when not set' }),
    domain: z.string().openapi({ description: '"" when not set' }),
    latest_version: z.string().openapi({ description: 'the latest version (ADR 0010); "" when no version qualifies' }),
    status: z.enum(["active", "deprecated"]),
    created_at: z.number().int().openapi({ description: "Unix seconds" }),
    updated_at: z.number().int().openapi({ description: "Unix seconds" }),
  })
  .openapi("StackTemplate");

/** Spec §2.9. */
export const StackVersionSchema = z
  .object({
    id: z.string(),
    template_id: z.string(),
    version: z.string(),
    stack_definition: z.string().openapi({ description: "the published stackDefinition object, serialized as JSON" }),
    core_sdk_version: z.string(),
    status: z.enum(["active", "deprecated"]),
    published_at: z.number().int().openapi({ description: "Unix seconds" }),
    created_at: z.number().int().openapi({ description: "Unix seconds" }),
  })
  .openapi("StackVersion");

export const IdResult = z.object({ id: z.string() }).openapi("IdResult");
export const OkResult = z.object({ ok: z.literal(true) }).openapi("OkResult");

/** path segments are bounded so junk never reaches the database; unknown names answer 404 */
export const NameParams = z.object({
  name: z.string().min(1).max(128).openapi({ param: { name: "name", in: "path" } }),
});
export const VersionParams = NameParams.extend({
  version: z.string().min(1).max(128).openapi({ param: { name: "version", in: "path" } }),
});

export const templateJson = (row: TemplateRow, latestVersion: string | null): z.infer<typeof StackTemplateSchema> => ({
  id: row.id,
  name: row.name,
  display_name: row.displayName,
  description: row.description,
  icon: row.icon,
  domain: row.domain,
  latest_version: latestVersion ?? "",
  status: row.status,
  created_at: unixSeconds(row.createdAt),
  updated_at: unixSeconds(row.updatedAt),
});

export const versionJson = (row: VersionRow): z.infer<typeof StackVersionSchema> => ({
  id: row.id,
  template_id: row.templateId,
  version: row.version,
  stack_definition: JSON.stringify(row.stackDefinition),
  core_sdk_version: row.coreSdkVersion,
  status: row.status,
  published_at: unixSeconds(row.publishedAt),
  created_at: unixSeconds(row.createdAt),
});
