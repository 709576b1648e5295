import { z } from "@hono/zod-openapi";
import { cursorParam, limitParam } from "@core/kit";
import type { PlatformRow, StackRow } from "../db/schema.js";

/** Shapes of spec §2.10. */
export const PlatformSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    slug: z.string(),
    status: z.enum(["active", "suspended"]),
    tier: z.string(),
    hostAccountId: z.string().nullable(),
    repoName: z.string().nullable(),
    createdAt: z.string().openapi({ format: "date-time" }),
    updatedAt: z.string().openapi({ format: "date-time" }),
  })
  .openapi("Platform");

export const StackSchema = z
  .object({
    id: z.string(),
    tenantId: z.string(),
    platformId: z.string(),
    name: z.string(),
    isDefault: z.boolean(),
    templateId: z.string().nullable(),
    repoName: z.string().nullable(),
    status: z.enum(["active", "archived"]),
    createdAt: z.string().openapi({ format: "date-time" }),
    updatedAt: z.string().openapi({ format: "date-time" }),
  })
  .openapi("Stack");

export const CreateStackResultSchema = z
  .object({ id: z.string(), name: z.string(), status: z.string(), isDefault: z.boolean(), createdAt: z.string() })
  .openapi("CreateStackResult");

export const pageOf = <T extends z.ZodType>(item: T, name: string) =>
  z.object({ data: z.array(item), cursor: z.string().nullable() }).openapi(name);

export const PageQuery = z.object({
  limit: limitParam(50),
  cursor: cursorParam(),
});

/** ids in paths; bounded so junk never reaches the database */
export const pathId = (name: string) => z.string().min(1).max(128).openapi({ param: { name, in: "path" } });

export const platformJson = (row: PlatformRow): z.infer<typeof PlatformSchema> => ({
  id: row.id,
  name: row.name,
  slug: row.slug,
  status: row.status,
  tier: row.tier,
  hostAccountId: row.hostAccountId,
  repoName: row.repoName,
  createdAt: row.createdAt.toISOString(),
  updatedAt: row.updatedAt.toISOString(),
});

export const stackJson = (row: StackRow): z.infer<typeof StackSchema> => ({
  id: row.id,
  tenantId: row.tenantId,
  platformId: row.platformId,
  name: row.name,
  isDefault: row.isDefault,
  templateId: row.templateId,
  repoName: row.repoName,
  status: row.status,
  createdAt: row.createdAt.toISOString(),
  updatedAt: row.updatedAt.toISOString(),
});
