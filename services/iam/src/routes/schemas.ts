import { z } from "@hono/zod-openapi";

/** Organization name and slug limits (spec §8). */
export const OrgName = z.string().min(1).max(100);
export const OrgSlug = z
  .string()
  .min(1)
  .max(63)
  .regex(/^[a-z0-9-]+$/, "Use lowercase letters, digits and hyphens only");

/** A person's name: on the profile, and on sign-up through the auth library (issue 10). */
export const ProfileName = z.string().min(1).max(100);

/** Identifiers in paths and bodies: min1 per spec, bounded so junk never reaches the database. */
export const Id = z.string().min(1).max(128);

/** A permission string (ADR 0004): what role mappings hold and grants give or deny. */
export const Permission = z
  .string()
  .min(1)
  .max(64)
  .regex(/^[a-z][a-z0-9-]*:[a-z][a-z0-9-]*$/, "A permission looks like resource:action");

export const pathParam = (name: string) => Id.openapi({ param: { name, in: "path" } });
