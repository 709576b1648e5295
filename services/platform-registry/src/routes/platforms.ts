import { createRoute, z } from "@hono/zod-openapi";
import { changingSomething, errorResponses, security, forbidden, jsonBody, jsonContent, type ServiceApp } from "@core/kit";
import { createPlatform, findPlatform, listPlatforms, platformSuspended, updatePlatform } from "../platforms.js";
import { authorizePlatform, authorizePlatformAdmin, seesAllPlatforms } from "../access.js";
import { activeOrganizationHint, forbiddenFor, requireCaller } from "@core/service-auth";
import type { RegistryContext } from "../app.js";
import { PageQuery, PlatformSchema, pageOf, pathId, platformJson } from "./schemas.js";

const CreatePlatformInput = z
  .object({
    name: z.string().min(1).max(100),
    slug: z.string().min(1).max(63).regex(/^[a-z0-9-]+$/, "lowercase letters, digits and hyphens only"),
    tier: z.string().min(1).max(64),
    hostAccountId: z.string().min(1).max(256).optional(),
    repoName: z.string().min(1).max(256).optional(),
  })
  .openapi("CreatePlatformInput");

const UpdatePlatformInput = changingSomething(
  z.object({
    name: z.string().min(1).max(100).optional(),
    tier: z.string().min(1).max(64).optional(),
    hostAccountId: z.string().min(1).max(256).nullable().optional(),
    repoName: z.string().min(1).max(256).nullable().optional(),
    status: z.enum(["active", "suspended"]).optional(),
  }),
).openapi("UpdatePlatformInput");

const PlatformListQuery = PageQuery.extend({
  slug: z
    .string()
    .regex(/^[a-z0-9-]{1,63}$/, "A slug is 1-63 lowercase letters, digits and hyphens")
    .optional()
    .openapi({ description: "only the platform with this slug (IAM finishes an interrupted org setup with it)" }),
});

const PlatformParams = z.object({ platformId: pathId("platformId") });

export function platformRoutes(app: ServiceApp, { db, clock, credentials }: RegistryContext) {
  app.openapi(
    createRoute({
      method: "get",
      path: "/platforms",
      summary: "List platforms (spec §4.6): every platform for operators and services, your own otherwise",
      security: security.anyCredential,
      request: { query: PlatformListQuery },
      responses: { 200: jsonContent(pageOf(PlatformSchema, "PlatformPage"), "A page of platforms"), ...errorResponses(400, 401, 403) },
    }),
    async (c) => {
      const caller = await requireCaller(c, credentials);
      const { limit, cursor, slug } = c.req.valid("query");
      let onlyId: string | undefined;
      if (!seesAllPlatforms(caller)) {
        const p = caller.kind === "principal" ? caller.principal : null;
        if (!p?.platformId || !p.permissions.includes("platform:read")) throw forbiddenFor(p, `You need platform:read.${p && !p.platformId ? ` ${activeOrganizationHint(p)}` : ""}`);
        onlyId = p.platformId;
      }
      const page = await listPlatforms(db, { limit, cursor, onlyId, slug });
      return c.json({ data: page.data.map(platformJson), cursor: page.cursor }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: "post",
      path: "/platforms",
      summary: "Create a platform (services such as IAM's org-setup, and operators)",
      security: security.bearer,
      request: { body: jsonBody(CreatePlatformInput) },
      responses: { 201: jsonContent(PlatformSchema, "The created platform"), ...errorResponses(400, 401, 403, 409) },
    }),
    async (c) => {
      await authorizePlatformAdmin(c, credentials);
      const row = await createPlatform(db, clock, c.req.valid("json"));
      return c.json(platformJson(row), 201);
    },
  );

  app.openapi(
    createRoute({
      method: "get",
      path: "/platforms/{platformId}",
      summary: "One platform",
      security: security.anyCredential,
      request: { params: PlatformParams },
      responses: { 200: jsonContent(PlatformSchema, "The platform"), ...errorResponses(401, 403, 404) },
    }),
    async (c) => {
      const { platformId } = c.req.valid("param");
      await authorizePlatform(c, credentials, platformId, "platform:read");
      return c.json(platformJson(await findPlatform(db, platformId)), 200);
    },
  );

  app.openapi(
    createRoute({
      method: "patch",
      path: "/platforms/{platformId}",
      summary:
        "Change a platform. Members with platform:write change name and links; tier is for operators and services; status only for services " +
        "(IAM relays POST /internal/platform-status, spec §3)",
      security: security.anyCredential,
      request: { params: PlatformParams, body: jsonBody(UpdatePlatformInput) },
      responses: { 200: jsonContent(PlatformSchema, "The updated platform"), ...errorResponses(400, 401, 403, 404) },
    }),
    async (c) => {
      const { platformId } = c.req.valid("param");
      const changes = c.req.valid("json");
      const administrative = changes.status !== undefined || changes.tier !== undefined;
      const caller = administrative ? await authorizePlatformAdmin(c, credentials) : await authorizePlatform(c, credentials, platformId, "platform:write");
      // spec §3: suspension moves through IAM, which tells this registry and keeps its own copy for
      // every principal it resolves; a status set here alone would leave the two disagreeing
      if (changes.status !== undefined && caller.kind !== "service") {
        throw forbidden("A platform's status changes through IAM: POST /internal/platform-status, so every service sees the same status");
      }
      const current = await findPlatform(db, platformId);
      // a suspended platform keeps reads and loses writes; lifting the suspension is the way back,
      // and suspending it again changes nothing
      if (current.status === "suspended" && changes.status !== "active") {
        const onlySuspends = Object.keys(changes).length === 1 && changes.status === "suspended";
        if (onlySuspends) return c.json(platformJson(current), 200);
        // the tier follows billing, where a suspended platform can still pay and change tier (DESIGN §6.7)
        const tierFromService = caller.kind === "service" && Object.keys(changes).every((field) => field === "tier");
        if (!tierFromService) throw platformSuspended();
      }
      return c.json(platformJson(await updatePlatform(db, clock, platformId, changes)), 200);
    },
  );
}
