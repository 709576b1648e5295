import { createRoute, z } from "@hono/zod-openapi";
import { errorResponses, jsonBody, MAX_JSON_DEPTH, jsonContent, security, type ServiceApp } from "@core/kit";
import { authorizePublisher } from "../access.js";
import type { StackRegistryContext } from "../app.js";
import { deprecateVersion, findTemplate, findVersion, listVersions, publishVersion } from "../catalogue.js";
import { definitionTooLarge } from "../error-codes.js";
import { isStackVersion } from "../semver.js";
import { IdResult, LIMITS, NameParams, OkResult, StackVersionSchema, VersionParams, VersionString, versionJson } from "./schemas.js";

const SemanticVersion = VersionString.refine(isStackVersion, "not a valid semantic version (semver.org): no leading zeros, no empty identifiers");

/** Spec §4.5 row POST /api/v1/stacks/{name}/versions. */
const PublishVersionInput = z
  .object({
    version: SemanticVersion,
    stackDefinition: z
      .record(z.string(), z.unknown())
      .openapi({
        description:
          `any JSON object, at most ${LIMITS.definitionBytes} bytes serialized (413 beyond), nested at most ${MAX_JSON_DEPTH} levels ` +
          "deep counting the request body's own object, without U+0000 in any string or key (400)",
      }),
    coreSdkVersion: SemanticVersion,
  })
  .strict()
  .openapi("PublishStackVersionInput");

const VersionList = z.object({ data: z.array(StackVersionSchema), total: z.number().int() }).openapi("StackVersionList");

export function versionRoutes(app: ServiceApp, { db, clock, credentials }: StackRegistryContext) {
  // registered before /{name}/{version}, which would otherwise take "versions" for a version
  app.openapi(
    createRoute({
      method: "get",
      path: "/api/v1/stacks/{name}/versions",
      summary: "Every version of a template, deprecated ones included, highest semver precedence first",
      security: security.anyCredential,
      request: { params: NameParams },
      responses: { 200: jsonContent(VersionList, "The versions"), ...errorResponses(401, 404) },
    }),
    async (c) => {
      const template = await findTemplate(db, c.req.valid("param").name);
      const list = await listVersions(db, template.id);
      return c.json({ data: list.map(versionJson), total: list.length }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: "post",
      path: "/api/v1/stacks/{name}/versions",
      summary:
        "Publish a version (immutable). 404 TEMPLATE_NOT_FOUND, 409 VERSION_EXISTS, 409 TEMPLATE_DEPRECATED, 400 VALIDATION_ERROR, 413 PAYLOAD_TOO_LARGE",
      security: security.anyCredential,
      request: { params: NameParams, body: jsonBody(PublishVersionInput) },
      responses: { 201: jsonContent(IdResult, "The new version's id"), ...errorResponses(400, 401, 403, 404, 409, 413) },
    }),
    async (c) => {
      await authorizePublisher(c, credentials);
      const input = c.req.valid("json");
      const bytes = Buffer.byteLength(JSON.stringify(input.stackDefinition));
      if (bytes > LIMITS.definitionBytes) throw definitionTooLarge(bytes, LIMITS.definitionBytes);
      const template = await findTemplate(db, c.req.valid("param").name);
      const row = await publishVersion(db, clock, template, input);
      return c.json({ id: row.id }, 201);
    },
  );

  app.openapi(
    createRoute({
      method: "get",
      path: "/api/v1/stacks/{name}/{version}",
      summary: "One version, deprecated or not",
      security: security.anyCredential,
      request: { params: VersionParams },
      responses: { 200: jsonContent(StackVersionSchema, "The version"), ...errorResponses(401, 404) },
    }),
    async (c) => {
      const { name, version } = c.req.valid("param");
      const template = await findTemplate(db, name);
      return c.json(versionJson(await findVersion(db, template, version)), 200);
    },
  );

  app.openapi(
    createRoute({
      method: "delete",
      path: "/api/v1/stacks/{name}/{version}",
      summary: "Deprecate a version: it stays readable and stops counting as latest (spec §3)",
      security: security.anyCredential,
      request: { params: VersionParams },
      responses: { 200: jsonContent(OkResult, "Deprecated"), ...errorResponses(401, 403, 404) },
    }),
    async (c) => {
      await authorizePublisher(c, credentials);
      const { name, version } = c.req.valid("param");
      await deprecateVersion(db, await findTemplate(db, name), version);
      return c.json({ ok: true as const }, 200);
    },
  );
}
