import { createRoute, z } from "@hono/zod-openapi";
import { and, eq } from "drizzle-orm";
import {
  ApiError,
  conflict,
  cursorParam,
  decodeCursor,
  errorResponses,
  forbidden,
  jsonBody,
  jsonContent,
  limitParam,
  notFound,
  security,
  toPage,
  unixSeconds,
  type ServiceApp,
} from "@core/kit";
import { keysetAfter, keysetOrder, type KeysetColumns } from "@core/storage";
import { actorOf, requireCaller, requirePermission } from "../access.js";
import type { IamContext } from "../app.js";
import { invitationMail } from "../auth.js";
import { invitation, member, user } from "../db/schema.js";
import { createPendingInvitation, invitationStatus, type InvitationRow } from "../invitations.js";
import { authStyleId, findOrganization } from "../organizations.js";
import { rolesOf } from "../permissions.js";
import { Id, pathParam } from "./schemas.js";

/** Invitation of spec §2.5; timestamps in Unix seconds (DESIGN §2). */
const InvitationSchema = z
  .object({
    id: z.string(),
    organizationId: z.string(),
    email: z.string(),
    role: z.enum(["owner", "admin", "member"]),
    status: z.string(),
    expiresAt: z.number().int(),
    inviterId: z.string(),
    createdAt: z.number().int(),
  })
  .openapi("Invitation");

const CreateInvitationInput = z
  .object({
    email: z.email().max(320),
    role: z.enum(["owner", "admin", "member"]).default("member"),
    inviterId: Id.optional(),
  })
  .openapi("CreateInvitationInput");

const OrgParams = z.object({ orgId: pathParam("orgId") });

const invitationJson = (row: InvitationRow, now: Date): z.infer<typeof InvitationSchema> => ({
  id: row.id,
  organizationId: row.organizationId,
  email: row.email,
  role: (row.role ?? "member") as "owner" | "admin" | "member",
  status: invitationStatus(row, now),
  expiresAt: unixSeconds(row.expiresAt),
  inviterId: row.inviterId,
  createdAt: unixSeconds(row.createdAt),
});

const OLDEST_FIRST: KeysetColumns = { key: invitation.createdAt, tie: invitation.id, direction: "asc" };

/** Organization invitations (spec §2.5, §3, §4.3). */
export function invitationRoutes(app: ServiceApp, ctx: IamContext) {
  app.openapi(
    createRoute({
      method: "get",
      path: "/api/core/organizations/{orgId}/invitations",
      summary: "List an organization's invitations, oldest first; cursor is \"\" on the last page",
      security: security.anyCredential,
      request: {
        params: OrgParams,
        query: z.object({ cursor: cursorParam(), limit: limitParam(50, 100) }),
      },
      responses: {
        200: jsonContent(z.object({ data: z.array(InvitationSchema), cursor: z.string() }).openapi("InvitationPage"), "A page of invitations"),
        ...errorResponses(400, 401, 403, 404),
      },
    }),
    async (c) => {
      const { orgId } = c.req.valid("param");
      const { cursor, limit } = c.req.valid("query");
      const caller = await requireCaller(c, ctx.credentials, ctx.session);
      requirePermission(caller, "members:invite", { orgId });
      await findOrganization(ctx.db, orgId);
      const rows = await ctx.db
        .select()
        .from(invitation)
        .where(and(eq(invitation.organizationId, orgId), keysetAfter(OLDEST_FIRST, decodeCursor(cursor, { key: "timestamp", tie: "id" }))))
        .orderBy(...keysetOrder(OLDEST_FIRST))
        .limit(limit + 1);
      const page = toPage(rows, limit, (r) => ({ k: r.createdAt, id: r.id }));
      const now = ctx.clock.now();
      return c.json({ data: page.data.map((row) => invitationJson(row, now)), cursor: page.cursor ?? "" }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: "post",
      path: "/api/core/organizations/{orgId}/invitations",
      summary: "Invite someone by email; only owners may invite owners",
      security: security.anyCredential,
      request: { params: OrgParams, body: jsonBody(CreateInvitationInput) },
      responses: { 201: jsonContent(InvitationSchema, "The created invitation"), ...errorResponses(400, 401, 403, 404, 409) },
    }),
    async (c) => {
      const { orgId } = c.req.valid("param");
      const input = c.req.valid("json");
      const caller = await requireCaller(c, ctx.credentials, ctx.session);
      requirePermission(caller, "members:invite", { orgId });
      const org = await findOrganization(ctx.db, orgId);
      let inviterId: string;
      if (caller.kind === "principal") {
        if (input.inviterId && input.inviterId !== caller.principal.userId) throw forbidden("inviterId must be your own user id");
        inviterId = caller.principal.userId;
        const operator = caller.principal.orgType === "core-operator";
        if (input.role === "owner" && !operator && caller.principal.role !== "owner") throw forbidden("Only owners may invite owners");
      } else {
        if (!input.inviterId) throw new ApiError(400, "VALIDATION_ERROR", "Invalid body: inviterId", [{ path: "inviterId", message: "A service must name the inviting user", code: "custom" }]);
        const [inviter] = await ctx.db.select({ id: user.id }).from(user).where(eq(user.id, input.inviterId));
        if (!inviter) throw notFound(`No user ${input.inviterId}`);
        inviterId = inviter.id;
      }
      const email = input.email.toLowerCase();
      const [alreadyMember] = await ctx.db
        .select({ role: member.role })
        .from(member)
        .innerJoin(user, eq(user.id, member.userId))
        .where(and(eq(member.organizationId, orgId), eq(user.email, email)));
      if (alreadyMember) throw conflict("ALREADY_MEMBER", `${email} is already a member (${rolesOf(alreadyMember.role).join(", ")})`);
      const now = ctx.clock.now();
      // one pending invitation per address, by the index (invitations.ts): 409 INVITATION_EXISTS otherwise
      const row = await createPendingInvitation(
        ctx.db,
        { id: authStyleId(), organizationId: orgId, email, role: input.role, expiresAt: new Date(now.getTime() + ctx.config.invitationSeconds * 1000), createdAt: now, inviterId },
        now,
      );
      const [from] = await ctx.db.select({ name: user.name, email: user.email }).from(user).where(eq(user.id, inviterId));
      await ctx.mailer.send(
        invitationMail(ctx.config.iamUrl, { email, orgName: org.name, invitationId: row.id, role: input.role, inviter: from ?? { name: "Someone", email: "" }, expiresAt: row.expiresAt }),
      );
      await ctx.audit.record({
        action: "invitation.create",
        outcome: "success",
        ...actorOf(c, caller),
        orgId,
        targetType: "invitation",
        targetId: row.id,
        metadata: { email, role: input.role },
      });
      return c.json(invitationJson(row, now), 201);
    },
  );

  app.openapi(
    createRoute({
      method: "delete",
      path: "/api/core/organizations/{orgId}/invitations/{invitationId}",
      summary: "Revoke a pending invitation",
      security: security.anyCredential,
      request: { params: z.object({ orgId: pathParam("orgId"), invitationId: pathParam("invitationId") }) },
      responses: { 200: jsonContent(z.object({ id: z.string() }), "The revoked invitation's id"), ...errorResponses(401, 403, 404, 409) },
    }),
    async (c) => {
      const { orgId, invitationId } = c.req.valid("param");
      const caller = await requireCaller(c, ctx.credentials, ctx.session);
      requirePermission(caller, "members:invite", { orgId });
      const [row] = await ctx.db
        .select()
        .from(invitation)
        .where(and(eq(invitation.id, invitationId), eq(invitation.organizationId, orgId)));
      if (!row) throw notFound(`No invitation ${invitationId} in this organization`);
      const [updated] = await ctx.db
        .update(invitation)
        .set({ status: "canceled" })
        .where(and(eq(invitation.id, invitationId), eq(invitation.status, "pending")))
        .returning({ id: invitation.id });
      if (!updated) throw conflict("INVITATION_NOT_PENDING", `The invitation is ${row.status}, not pending`);
      await ctx.audit.record({
        action: "invitation.revoke",
        outcome: "success",
        ...actorOf(c, caller),
        orgId,
        targetType: "invitation",
        targetId: invitationId,
      });
      return c.json({ id: invitationId }, 200);
    },
  );
}

