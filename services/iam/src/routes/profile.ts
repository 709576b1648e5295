import { createRoute, z } from "@hono/zod-openapi";
import { eq } from "drizzle-orm";
import type { Context } from "hono";
import { errorResponses, jsonBody, jsonContent, security, unauthenticated, unixSeconds, type ServiceApp } from "@core/kit";
import type { Principal } from "@core/service-auth";
import { actorOf, requireSession } from "../access.js";
import type { IamContext } from "../app.js";
import { user } from "../db/schema.js";
import { ProfileName } from "./schemas.js";

const ProfileSchema = z
  .object({
    id: z.string(),
    email: z.string(),
    name: z.string(),
    image: z.string().nullable(),
    emailVerified: z.boolean(),
    createdAt: z.number().int(),
  })
  .openapi("Profile");

/** spec §2.6: name optional min1, image a URI or null (http(s) only: it is shown in pages) */
export const ProfileInput = z
  .object({
    name: ProfileName.optional(),
    image: z
      .url({ protocol: /^https?$/ })
      .max(2048)
      .nullable()
      .optional(),
  })
  .strict()
  .openapi("ProfileInput");

type UserRow = typeof user.$inferSelect;
const profileJson = (u: UserRow) => ({
  id: u.id,
  email: u.email,
  name: u.name,
  image: u.image,
  emailVerified: u.emailVerified,
  createdAt: unixSeconds(u.createdAt),
});

/** The signed-in user's profile (spec §4.3). */
export function profileRoutes(app: ServiceApp, ctx: IamContext) {
  async function load(userId: string) {
    const [row] = await ctx.db.select().from(user).where(eq(user.id, userId));
    if (!row) throw unauthenticated("Your session is invalid or has expired");
    return row;
  }

  app.openapi(
    createRoute({
      method: "get",
      path: "/api/auth/profile",
      summary: "The caller's profile",
      security: security.session,
      responses: { 200: jsonContent(ProfileSchema, "The profile"), ...errorResponses(401) },
    }),
    async (c) => {
      const { principal } = await requireSession(c, ctx.session);
      return c.json(profileJson(await load(principal.userId)), 200);
    },
  );

  app.openapi(
    createRoute({
      method: "patch",
      path: "/api/auth/profile",
      summary: "Change the caller's name or image",
      security: security.session,
      request: { body: jsonBody(ProfileInput) },
      responses: { 200: jsonContent(ProfileSchema, "The updated profile"), ...errorResponses(400, 401, 403) },
    }),
    async (c) => {
      const { principal } = await requireSession(c, ctx.session);
      await updateProfile(c, ctx, principal, c.req.valid("json"));
      return c.json(profileJson(await load(principal.userId)), 200);
    },
  );
}

/** Changes the caller's name or image, audited; the JSON route and the account page share it. */
export async function updateProfile(c: Context, ctx: IamContext, principal: Principal, changes: z.infer<typeof ProfileInput>) {
  if (Object.keys(changes).length === 0) return;
  await ctx.db
    .update(user)
    .set({ ...changes, updatedAt: ctx.clock.now() })
    .where(eq(user.id, principal.userId));
  await ctx.audit.record({
    action: "profile.update",
    outcome: "success",
    ...actorOf(c, { kind: "principal", principal }),
    targetType: "user",
    targetId: principal.userId,
    metadata: { fields: Object.keys(changes) },
  });
}
