import { createRoute, z } from "@hono/zod-openapi";
import type { Context } from "hono";
import { errorResponses, forbidden, jsonBody, jsonContent, security, type ServiceApp } from "@core/kit";
import { actorOf, requireCaller, requirePermission, requireSession } from "../access.js";
import type { IamContext } from "../app.js";
import { allProviders, approveProvider, deleteProvider, providersOf, providerView, registerProvider, requireOwner, SSO_JOIN_ROLES, updateProvider, type SsoActor } from "../sso.js";
import { pathParam } from "./schemas.js";

const SsoProviderSchema = z
  .object({
    providerId: z.string(),
    organizationId: z.string(),
    issuer: z.string(),
    clientId: z.string(),
    domains: z.array(z.string()),
    domainsApproved: z.boolean().openapi({ description: "Whether an operator approved the domains: until then nobody signs in through the provider" }),
    defaultRole: z.enum(SSO_JOIN_ROLES),
    redirectUri: z.string().openapi({ description: "The redirect URI to register at the identity provider" }),
  })
  .openapi("SsoProvider");

const Domains = z.array(z.string().min(1).max(253)).min(1).max(20);
const ClientId = z.string().min(1).max(255);
const ClientSecret = z.string().min(1).max(1024);

const CreateSsoProviderInput = z
  .object({
    issuer: z
      .url({ protocol: /^https?$/ })
      .max(1024)
      .openapi({
        description:
          "The provider's issuer, as its /.well-known/openid-configuration names it: an https address whose name resolves to a public address (http, loopback and private addresses only where the operator allows them), among the operator's origins when a list is set; IAM reads the discovery document and checks each endpoint in it the same way (400 naming why)",
      }),
    clientId: ClientId,
    clientSecret: ClientSecret,
    domains: Domains,
    defaultRole: z.enum(SSO_JOIN_ROLES).default("member"),
  })
  .strict()
  .openapi("CreateSsoProviderInput");

const UpdateSsoProviderInput = z
  .object({ clientId: ClientId.optional(), clientSecret: ClientSecret.optional(), domains: Domains.optional(), defaultRole: z.enum(SSO_JOIN_ROLES).optional() })
  .strict()
  .openapi("UpdateSsoProviderInput");

const OrgParams = z.object({ orgId: pathParam("orgId") });
const ProviderParams = z.object({ orgId: pathParam("orgId"), providerId: pathParam("providerId") });

/** The calling owner, with a session (the plugin acts with it); API keys and services do not configure sign-in. */
async function ownerSession(c: Context, ctx: IamContext): Promise<SsoActor> {
  const caller = await requireCaller(c, ctx.credentials, ctx.session);
  if (caller.kind !== "principal" || caller.principal.type !== "user") throw forbidden("Configuring single sign-on needs a signed-in owner's session, not an API key or a service");
  const session = await requireSession(c, ctx.session);
  return { userId: session.principal.userId, sessionToken: session.token, audit: actorOf(c, caller) };
}

/** Organization single sign-on (ADR 0026): owners configure their provider, operators approve its domains. */
export function ssoRoutes(app: ServiceApp, ctx: IamContext) {
  app.openapi(
    createRoute({
      method: "get",
      path: "/api/core/organizations/{orgId}/sso-providers",
      summary: "The organization's single sign-on provider (owners); the client secret is never answered",
      security: security.anyCredential,
      request: { params: OrgParams },
      responses: { 200: jsonContent(z.object({ data: z.array(SsoProviderSchema) }).openapi("SsoProviderList"), "The providers"), ...errorResponses(401, 403, 404) },
    }),
    async (c) => {
      const { orgId } = c.req.valid("param");
      const actor = await ownerSession(c, ctx);
      await requireOwner(ctx, orgId, actor);
      const rows = await providersOf(ctx.db, orgId);
      return c.json({ data: rows.map((r) => providerView(r, ctx.config.iamUrl)) }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: "post",
      path: "/api/core/organizations/{orgId}/sso-providers",
      summary: "Register the organization's OpenID Connect provider (owners); its domains sign people in once an operator approved them",
      security: security.anyCredential,
      request: { params: OrgParams, body: jsonBody(CreateSsoProviderInput) },
      responses: { 201: jsonContent(SsoProviderSchema, "The registered provider"), ...errorResponses(400, 401, 403, 404, 409, 422, 502) },
    }),
    async (c) => {
      const { orgId } = c.req.valid("param");
      const input = c.req.valid("json");
      const actor = await ownerSession(c, ctx);
      return c.json(await registerProvider(ctx, orgId, actor, input), 201);
    },
  );

  app.openapi(
    createRoute({
      method: "patch",
      path: "/api/core/organizations/{orgId}/sso-providers/{providerId}",
      summary: "Change the provider's client id or secret, domains or join role (owners); changed domains need approval again",
      security: security.anyCredential,
      request: { params: ProviderParams, body: jsonBody(UpdateSsoProviderInput) },
      responses: { 200: jsonContent(SsoProviderSchema, "The provider as it is now"), ...errorResponses(400, 401, 403, 404, 409, 422) },
    }),
    async (c) => {
      const { orgId, providerId } = c.req.valid("param");
      const change = c.req.valid("json");
      const actor = await ownerSession(c, ctx);
      return c.json(await updateProvider(ctx, orgId, providerId, actor, change), 200);
    },
  );

  app.openapi(
    createRoute({
      method: "delete",
      path: "/api/core/organizations/{orgId}/sso-providers/{providerId}",
      summary: "Remove the provider (owners); people keep their accounts and memberships",
      security: security.anyCredential,
      request: { params: ProviderParams },
      responses: { 204: { description: "Removed" }, ...errorResponses(401, 403, 404) },
    }),
    async (c) => {
      const { orgId, providerId } = c.req.valid("param");
      const actor = await ownerSession(c, ctx);
      await deleteProvider(ctx, orgId, providerId, actor);
      return c.body(null, 204);
    },
  );

  app.openapi(
    createRoute({
      method: "get",
      path: "/api/core/sso-providers",
      summary: "Every organization's single sign-on provider, those awaiting approval first (operators)",
      security: security.anyCredential,
      responses: { 200: jsonContent(z.object({ data: z.array(SsoProviderSchema) }).openapi("SsoProviderListAll"), "The providers"), ...errorResponses(401, 403) },
    }),
    async (c) => {
      const caller = await requireCaller(c, ctx.credentials, ctx.session);
      if (caller.kind !== "principal" || caller.principal.orgType !== "core-operator") throw forbidden("Only operators list every organization's provider");
      requirePermission(caller, "orgs:create");
      return c.json({ data: await allProviders(ctx) }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: "post",
      path: "/api/core/sso-providers/{providerId}/approval",
      summary: "Approve a provider's domain claim (operators), once they checked the organization owns those domains",
      security: security.anyCredential,
      request: { params: z.object({ providerId: pathParam("providerId") }) },
      responses: { 200: jsonContent(SsoProviderSchema, "The approved provider"), ...errorResponses(401, 403, 404, 409) },
    }),
    async (c) => {
      const { providerId } = c.req.valid("param");
      const caller = await requireCaller(c, ctx.credentials, ctx.session);
      if (caller.kind !== "principal" || caller.principal.orgType !== "core-operator") throw forbidden("Only operators approve single sign-on domains");
      // the operators who may create organizations may vouch for their domains
      requirePermission(caller, "orgs:create");
      return c.json(await approveProvider(ctx, providerId, actorOf(c, caller)), 200);
    },
  );
}
