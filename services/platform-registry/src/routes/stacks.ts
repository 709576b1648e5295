import { createRoute, z } from "@hono/zod-openapi";
import { changingSomething, errorResponses, security, jsonBody, jsonContent, type ServiceApp } from "@core/kit";
import {
  createStack,
  deleteStack,
  findPlatform,
  findStack,
  listStacks,
  requireWritablePlatform,
  updateStack,
} from "../platforms.js";
import { authorizePlatform } from "../access.js";
import type { RegistryContext } from "../app.js";
import { CreateStackResultSchema, PageQuery, StackSchema, pageOf, pathId, stackJson } from "./schemas.js";

/** Create-stack input of spec §2.10 (lengths beyond min1 bounded so junk never reaches the database). */
const CreateStackInput = z
  .object({
    tenantId: z.string().min(1).max(128),
    name: z.string().min(1).max(128),
    isDefault: z.boolean().optional().default(false),
    templateId: z.string().min(1).max(128).optional(),
    repoName: z.string().min(1).max(256).optional(),
  })
  .openapi("CreateStackInput");

const UpdateStackInput = changingSomething(
  z.object({
    name: z.string().min(1).max(128).optional(),
    isDefault: z.boolean().optional(),
    templateId: z.string().min(1).max(128).nullable().optional(),
    repoName: z.string().min(1).max(256).nullable().optional(),
    status: z.enum(["active", "archived"]).optional(),
  }),
).openapi("UpdateStackInput");

const PlatformParams = z.object({ platformId: pathId("platformId") });
const StackParams = z.object({ platformId: pathId("platformId"), stackId: pathId("stackId") });

export function stackRoutes(app: ServiceApp, { db, clock, credentials }: RegistryContext) {
  app.openapi(
    createRoute({
      method: "get",
      path: "/platforms/{platformId}/stacks",
      summary: "List the workspace stacks of a platform (spec §4.6)",
      security: security.anyCredential,
      request: { params: PlatformParams, query: PageQuery },
      responses: { 200: jsonContent(pageOf(StackSchema, "StackPage"), "A page of stacks"), ...errorResponses(400, 401, 403, 404) },
    }),
    async (c) => {
      const { platformId } = c.req.valid("param");
      await authorizePlatform(c, credentials, platformId, "platform:read");
      await findPlatform(db, platformId);
      const page = await listStacks(db, platformId, c.req.valid("query"));
      return c.json({ data: page.data.map(stackJson), cursor: page.cursor }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: "post",
      path: "/platforms/{platformId}/stacks",
      summary: "Create a workspace stack (spec §4.6); a new default replaces the old one",
      security: security.anyCredential,
      request: { params: PlatformParams, body: jsonBody(CreateStackInput) },
      responses: {
        201: jsonContent(CreateStackResultSchema, "The created stack"),
        ...errorResponses(400, 401, 403, 404, 409),
      },
    }),
    async (c) => {
      const { platformId } = c.req.valid("param");
      await authorizePlatform(c, credentials, platformId, "platform:write");
      await requireWritablePlatform(db, platformId);
      const row = await createStack(db, clock, platformId, c.req.valid("json"));
      return c.json({ id: row.id, name: row.name, status: row.status, isDefault: row.isDefault, createdAt: row.createdAt.toISOString() }, 201);
    },
  );

  app.openapi(
    createRoute({
      method: "get",
      path: "/platforms/{platformId}/stacks/{stackId}",
      summary: "One workspace stack",
      security: security.anyCredential,
      request: { params: StackParams },
      responses: { 200: jsonContent(StackSchema, "The stack"), ...errorResponses(401, 403, 404) },
    }),
    async (c) => {
      const { platformId, stackId } = c.req.valid("param");
      await authorizePlatform(c, credentials, platformId, "platform:read");
      return c.json(stackJson(await findStack(db, platformId, stackId)), 200);
    },
  );

  app.openapi(
    createRoute({
      method: "patch",
      path: "/platforms/{platformId}/stacks/{stackId}",
      summary: "Change a workspace stack; making it the default clears the previous default",
      security: security.anyCredential,
      request: { params: StackParams, body: jsonBody(UpdateStackInput) },
      responses: { 200: jsonContent(StackSchema, "The updated stack"), ...errorResponses(400, 401, 403, 404, 409) },
    }),
    async (c) => {
      const { platformId, stackId } = c.req.valid("param");
      await authorizePlatform(c, credentials, platformId, "platform:write");
      await requireWritablePlatform(db, platformId);
      return c.json(stackJson(await updateStack(db, clock, platformId, stackId, c.req.valid("json"))), 200);
    },
  );

  app.openapi(
    createRoute({
      method: "delete",
      path: "/platforms/{platformId}/stacks/{stackId}",
      summary: "Delete a workspace stack",
      security: security.anyCredential,
      request: { params: StackParams },
      responses: { 200: jsonContent(z.object({ id: z.string() }), "The deleted stack's id"), ...errorResponses(401, 403, 404) },
    }),
    async (c) => {
      const { platformId, stackId } = c.req.valid("param");
      await authorizePlatform(c, credentials, platformId, "platform:write");
      await requireWritablePlatform(db, platformId);
      await deleteStack(db, platformId, stackId);
      return c.json({ id: stackId }, 200);
    },
  );
}
