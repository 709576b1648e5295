import { createRoute, z } from "@hono/zod-openapi";
import { cursorParam, errorResponses, forbidden, jsonBody, jsonContent, limitParam, security, type ServiceApp } from "@core/kit";
import { holds, type Principal } from "@core/service-auth";
import {
  endpointJson,
  enabledWebhookEndpoints,
  findWebhookEndpoint,
  listDeliveries,
  MAX_ROTATION_GRACE_SECONDS,
  registerWebhookEndpoint,
  removeWebhookEndpoint,
  rotateWebhookEndpointSecret,
  ROTATION_GRACE_SECONDS,
  type WebhookEndpointRow,
} from "@core/webhooks";
import { actorOf, requireSession } from "../access.js";
import type { IamContext } from "../app.js";
import type { AuditAction } from "../audit.js";
import { ALLOW_PRIVATE_SETTING, auditEndpointStore } from "../audit-stream.js";
import { findOrganization } from "../organizations.js";
import { Id, pathParam } from "./schemas.js";

/** `audit.<action>` exactly, or a prefix ending in `.*` (`audit.auth.*`, `audit.*`): new actions need no list. */
const EventPattern = z
  .string()
  .max(128)
  .regex(/^audit\.(\*|[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*(\.\*)?)$/, "audit.<action> (audit.auth.sign_in), or a prefix ending in .* (audit.auth.*)");

const EndpointInput = z
  .object({
    url: z
      .string()
      .min(1)
      .max(2048)
      .refine((v) => /^https?:\/\/[^\s/?#]+/i.test(v) && URL.canParse(v), "An http(s) URL")
      .openapi({ description: `Where each audit event is POSTed; loopback and private addresses only with ${ALLOW_PRIVATE_SETTING}=1` }),
    events: z
      .array(EventPattern)
      .min(1)
      .max(100)
      .refine((list) => new Set(list).size === list.length, "Each event type once")
      .optional()
      .openapi({ description: "The event types it takes (`audit.<action>`, or a prefix such as `audit.auth.*`); absent: all of them" }),
    description: z.string().min(1).max(500).optional(),
    orgId: Id.optional().openapi({
      description: "The organization whose events it takes. Operators may leave it out (every organization's events, and those of none); an owner's endpoint is always their organization's",
    }),
  })
  .strict()
  .openapi("AuditEndpointInput");

const EndpointSchema = z
  .object({
    id: z.string(),
    url: z.string(),
    events: z.array(z.string()).nullable().openapi({ description: "null: every event type" }),
    description: z.string().nullable(),
    orgId: z.string().nullable().openapi({ description: "the organization whose events it takes; null: every organization's (an operator's endpoint)" }),
    createdAt: z.number().int(),
    previousSecretExpiresAt: z
      .number()
      .int()
      .nullable()
      .openapi({ description: "Unix seconds (wall-clock): when the secret before the last rotation stops signing deliveries; null when the secret was never rotated" }),
  })
  .openapi("AuditEndpoint");

const CreatedEndpointSchema = EndpointSchema.extend({
  secret: z.string().openapi({ description: "whsec_…: what each delivery's Core-Signature is made with. Shown this once; keep it" }),
}).openapi("CreatedAuditEndpoint");

const RotateInput = z
  .object({
    expiresInSeconds: z
      .number()
      .int()
      .min(0)
      .max(MAX_ROTATION_GRACE_SECONDS)
      .optional()
      .openapi({ description: `How long the old secret keeps signing deliveries beside the new one: 0 retires it now; default ${ROTATION_GRACE_SECONDS} (a day), at most ${MAX_ROTATION_GRACE_SECONDS} (7 days)` }),
  })
  .strict()
  .openapi("RotateAuditEndpointSecretInput");

const AttemptSchema = z
  .object({
    attempt: z.number().int(),
    at: z.number().int(),
    status: z.number().int().nullable().openapi({ description: "the endpoint's HTTP status; null when it did not answer" }),
    response: z.string().openapi({ description: "the first 500 characters of the answer, or why there was none" }),
    durationMs: z.number().int(),
  })
  .openapi("AuditDeliveryAttempt");

const DeliverySchema = z
  .object({
    id: z.string(),
    eventId: z.string(),
    eventType: z.string().openapi({ description: "audit.<action>" }),
    status: z.enum(["pending", "delivered", "failed"]),
    attempts: z.array(AttemptSchema),
    nextAttemptAt: z.number().int().nullable().openapi({ description: "when a pending delivery is tried next" }),
    createdAt: z.number().int(),
    finishedAt: z.number().int().nullable(),
  })
  .openapi("AuditDelivery");

/** What a delivery's body is: signed with Core-Signature as billing's webhooks (guides/webhook-signing.md). */
const DELIVERY_BODY = "Each delivery POSTs `{id, type, createdAt, data}`: `type` is `audit.<action>`, `data` the audit event as GET /api/audit/events answers it (AuditEvent).";

const EndpointId = z.object({ id: pathParam("id") });

/** Who manages endpoints: operators, all of them; an owner, their organization's. */
type Manager = { orgId: null } | { orgId: string };

/** Operators hold org:manage and audit:read in the operator organization (its owners and admins by default). */
const isOperatorManager = (p: Principal) => p.orgType === "core-operator" && p.permissions.includes("org:manage") && p.permissions.includes("audit:read");

function managerOf(p: Principal): Manager {
  if (isOperatorManager(p)) return { orgId: null };
  // an organization's events leave IAM only where its owner says: admins read the audit log, they do not send it elsewhere
  if (p.orgId && p.role === "owner" && holds(p, "audit:read", { orgId: p.orgId })) return { orgId: p.orgId };
  throw forbidden("Audit endpoints are for operators (org:manage and audit:read in the operator organization) and an organization's owner");
}

/** The endpoint answer: the shared shape, with the organization it is scoped to. */
const json = (row: WebhookEndpointRow) => ({ ...endpointJson(row), orgId: (row as WebhookEndpointRow & { orgId: string | null }).orgId ?? null });

/**
 * `/api/audit/endpoints` (ADR 0027): where IAM's audit events are streamed. Operators register
 * endpoints for every organization's events (or one organization's); an owner for their own
 * organization's only. Each answer shows a secret only when it makes one. Every change is audited,
 * and so streamed like any other event.
 */
export function auditEndpointRoutes(app: ServiceApp, ctx: IamContext) {
  const store = (manager: Manager) => auditEndpointStore(ctx.db, manager.orgId ?? undefined);
  const audited = async (c: Parameters<typeof actorOf>[0], principal: Principal, action: AuditAction, row: WebhookEndpointRow, extra: Record<string, unknown> = {}) => {
    const endpoint = json(row);
    await ctx.audit.record({
      action,
      outcome: "success",
      ...actorOf(c, { kind: "principal", principal }),
      orgId: endpoint.orgId,
      targetType: "audit_endpoint",
      targetId: row.id,
      // never a secret: the endpoint's address, what it takes and (after a rotation) when the old secret stops
      metadata: { url: endpoint.url, events: endpoint.events, previousSecretExpiresAt: endpoint.previousSecretExpiresAt, ...extra },
    });
  };

  app.openapi(
    createRoute({
      method: "post",
      path: "/api/audit/endpoints",
      summary: "Register an endpoint for audit events; the answer shows its signing secret, once",
      description: DELIVERY_BODY,
      security: security.session,
      request: { body: jsonBody(EndpointInput) },
      responses: { 201: jsonContent(CreatedEndpointSchema, "The endpoint, with its secret"), ...errorResponses(400, 401, 403, 404, 409) },
    }),
    async (c) => {
      const { principal } = await requireSession(c, ctx.session);
      const manager = managerOf(principal);
      const { orgId: wanted, ...input } = c.req.valid("json");
      let orgId = manager.orgId;
      if (manager.orgId === null && wanted) {
        orgId = (await findOrganization(ctx.db, wanted)).id;
      } else if (manager.orgId !== null && wanted && wanted !== manager.orgId) {
        throw forbidden("An owner registers endpoints for their own organization's events only");
      }
      const row = await registerWebhookEndpoint(store({ orgId }), ctx.clock.now(), input, ctx.config.auditWebhookAllowPrivate, { orgId });
      await audited(c, principal, "audit_endpoint.create", row);
      return c.json({ ...json(row), secret: row.secret }, 201);
    },
  );

  app.openapi(
    createRoute({
      method: "get",
      path: "/api/audit/endpoints",
      summary: "The audit endpoints registered now: an operator's view is all of them (or one organization's), an owner's their organization's",
      security: security.session,
      request: { query: z.object({ orgId: Id.optional().openapi({ param: { name: "orgId", in: "query" } }) }) },
      responses: { 200: jsonContent(z.object({ data: z.array(EndpointSchema) }).openapi("AuditEndpointList"), "Every enabled endpoint, oldest first"), ...errorResponses(400, 401, 403) },
    }),
    async (c) => {
      const { principal } = await requireSession(c, ctx.session);
      const manager = managerOf(principal);
      const { orgId } = c.req.valid("query");
      if (manager.orgId !== null && orgId && orgId !== manager.orgId) throw forbidden("An owner sees their own organization's endpoints only");
      const rows = await enabledWebhookEndpoints(store(manager.orgId === null && orgId ? { orgId } : manager));
      return c.json({ data: rows.map(json) }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: "get",
      path: "/api/audit/endpoints/{id}",
      summary: "One audit endpoint (never its secret)",
      security: security.session,
      request: { params: EndpointId },
      responses: { 200: jsonContent(EndpointSchema, "The endpoint"), ...errorResponses(401, 403, 404) },
    }),
    async (c) => {
      const { principal } = await requireSession(c, ctx.session);
      return c.json(json(await findWebhookEndpoint(store(managerOf(principal)), c.req.valid("param").id)), 200);
    },
  );

  app.openapi(
    createRoute({
      method: "delete",
      path: "/api/audit/endpoints/{id}",
      summary: "Remove an audit endpoint: nothing more is sent to it, and its pending deliveries end as failed; its history stays readable",
      security: security.session,
      request: { params: EndpointId },
      responses: { 200: jsonContent(z.object({ id: z.string(), deleted: z.literal(true) }).openapi("DeletedAuditEndpoint"), "Removed"), ...errorResponses(401, 403, 404) },
    }),
    async (c) => {
      const { principal } = await requireSession(c, ctx.session);
      const { id } = c.req.valid("param");
      const removed = await removeWebhookEndpoint(store(managerOf(principal)), ctx.clock.now(), id);
      await audited(c, principal, "audit_endpoint.delete", removed);
      return c.json({ id, deleted: true as const }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: "post",
      path: "/api/audit/endpoints/{id}/rotate-secret",
      summary: "Give an audit endpoint a new signing secret, shown once; the old one keeps signing beside it for expiresInSeconds (default a day, 0: retired now, at most 7 days)",
      description:
        "As billing's (DESIGN §6.8): while the old secret is active every delivery carries both signatures (Core-Signature: t=<unix>,v1=<new>,v1=<old>); after it expires only the new one. " +
        "Rotating again while a previous secret is active replaces that previous secret with the current one (at most two sign at once). A removed endpoint is 404. The body may be left out.",
      security: security.session,
      request: { params: EndpointId, body: { ...jsonBody(RotateInput), required: false } },
      responses: { 200: jsonContent(CreatedEndpointSchema, "The endpoint, with its new secret"), ...errorResponses(400, 401, 403, 404) },
    }),
    async (c) => {
      const { principal } = await requireSession(c, ctx.session);
      const manager = managerOf(principal);
      const { id } = c.req.valid("param");
      const expiresInSeconds = (c.req.valid("json") as z.infer<typeof RotateInput> | undefined)?.expiresInSeconds ?? ROTATION_GRACE_SECONDS;
      const { after } = await rotateWebhookEndpointSecret(store(manager), ctx.clock.now(), id, expiresInSeconds);
      await audited(c, principal, "audit_endpoint.rotate_secret", after, { expiresInSeconds });
      return c.json({ ...json(after), secret: after.secret }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: "get",
      path: "/api/audit/endpoints/{id}/deliveries",
      summary: "An audit endpoint's deliveries, newest first, each with every attempt and how the endpoint answered",
      security: security.session,
      request: { params: EndpointId, query: z.object({ cursor: cursorParam(), limit: limitParam(20, 100) }) },
      responses: { 200: jsonContent(z.object({ data: z.array(DeliverySchema), cursor: z.string().nullable() }).openapi("AuditDeliveryPage"), "A page of deliveries"), ...errorResponses(400, 401, 403, 404) },
    }),
    async (c) => {
      const { principal } = await requireSession(c, ctx.session);
      return c.json(await listDeliveries(store(managerOf(principal)), c.req.valid("param").id, c.req.valid("query")), 200);
    },
  );
}

