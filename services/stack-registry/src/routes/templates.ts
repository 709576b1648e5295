import { createRoute, z } from "@hono/zod-openapi";
import { changingSomething, errorResponses, jsonBody, jsonContent, security, type ServiceApp } from "@core/kit";
import { authorizePublisher } from "../access.js";
import type { StackRegistryContext } from "../app.js";
import { createTemplate, findTemplate, latestVersion, listActiveTemplates, updateTemplate } from "../catalogue.js";
import { IdResult, LIMITS, NameParams, OkResult, StackTemplateSchema, StackVersionSchema, TemplateName, templateJson, versionJson } from "./schemas.js";

/** Spec §4.5 row POST /api/v1/stacks; icon and domain bounds are ours (ADR 0010). */
const CreateTemplateInput = z
  .object({
    name: TemplateName,
    displayName: z.string().min(1).max(LIMITS.displayName),
    description: z.string().min(1).max(LIMITS.description),
    icon: z.string().max(LIMITS.icon).optional(),
    domain: z.string().max(LIMITS.domain).optional(),
  })
  .strict()
  .openapi("CreateStackTemplateInput");

/** Spec §4.5 row PATCH: the name is immutable, so it (like any unknown field) is refused. */
const UpdateTemplateInput = changingSomething(
  z
    .object({
    displayName: z.string().min(1).max(LIMITS.displayName).optional(),
    description: z.string().min(1).max(LIMITS.description).optional(),
    icon: z.string().max(LIMITS.icon).optional().openapi({ description: '"" clears it' }),
    status: z.enum(["active", "deprecated"]).optional(),
    })
    .strict(),
).openapi("UpdateStackTemplateInput");

const TemplateList = z.object({ data: z.array(StackTemplateSchema), total: z.number().int() }).openapi("StackTemplateList");
const TemplateDetail = z
  .object({
    template: StackTemplateSchema,
    latestVersion: StackVersionSchema.nullable().openapi({ description: "the latest version in full; null when no version qualifies" }),
  })
  .openapi("StackTemplateDetail");

export function templateRoutes(app: ServiceApp, { db, clock, credentials }: StackRegistryContext) {
  app.openapi(
    createRoute({
      method: "get",
      path: "/api/v1/stacks",
      summary: "List the active stack templates by name, each with its latest version (spec §4.5)",
      security: security.anyCredential,
      responses: { 200: jsonContent(TemplateList, "The active templates"), ...errorResponses(401) },
    }),
    async (c) => {
      const list = await listActiveTemplates(db);
      return c.json({ data: list.map((t) => templateJson(t, t.latestVersion)), total: list.length }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: "post",
      path: "/api/v1/stacks",
      summary: "Create a stack template (operators with stacks:publish, services)",
      security: security.anyCredential,
      request: { body: jsonBody(CreateTemplateInput) },
      responses: { 201: jsonContent(IdResult, "The new template's id"), ...errorResponses(400, 401, 403, 409) },
    }),
    async (c) => {
      await authorizePublisher(c, credentials);
      const row = await createTemplate(db, clock, c.req.valid("json"));
      return c.json({ id: row.id }, 201);
    },
  );

  app.openapi(
    createRoute({
      method: "get",
      path: "/api/v1/stacks/{name}",
      summary: "One stack template, active or deprecated, with its latest version",
      security: security.anyCredential,
      request: { params: NameParams },
      responses: { 200: jsonContent(TemplateDetail, "The template"), ...errorResponses(401, 404) },
    }),
    async (c) => {
      const template = await findTemplate(db, c.req.valid("param").name);
      const latest = await latestVersion(db, template.id);
      return c.json({ template: templateJson(template, latest?.version ?? null), latestVersion: latest && versionJson(latest) }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: "patch",
      path: "/api/v1/stacks/{name}",
      summary: "Change a template's texts or icon, or move it between active and deprecated (spec §3)",
      security: security.anyCredential,
      request: { params: NameParams, body: jsonBody(UpdateTemplateInput) },
      responses: { 200: jsonContent(OkResult, "Changed"), ...errorResponses(400, 401, 403, 404) },
    }),
    async (c) => {
      await authorizePublisher(c, credentials);
      await updateTemplate(db, clock, c.req.valid("param").name, c.req.valid("json"));
      return c.json({ ok: true as const }, 200);
    },
  );
}
