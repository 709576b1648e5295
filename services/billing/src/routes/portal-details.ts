import type { Context } from "hono";
import { createRoute, z } from "@hono/zod-openapi";
import { ApiError, errorResponses, requestIdOf, security, type ServiceApp } from "@core/kit";
import { browserCallerOf } from "@core/service-auth";
import { platformScope } from "../access.js";
import type { BillingContext } from "../app.js";
import { customerJson, findCustomer, updateCustomer, type CustomerChange } from "../customers.js";
import { auditOperatorAction } from "../operator.js";
import type { CustomerRow } from "../db/schema.js";
import { renderBillingDetails, type DetailsValues } from "../pages/billing-details.js";
import { livePortalSession, type PortalSession } from "../portal.js";
import { BuyerPatch, platformCustomer } from "./customers.js";
import { platformQuery } from "./schemas.js";

const LABELS: Record<string, string> = {
  email: "Billing email",
  name: "Name or company",
  "address.line1": "Address line 1",
  "address.line2": "Address line 2",
  "address.city": "City",
  "address.postalCode": "Postal code",
  "address.state": "State or region code",
  "address.country": "Country code",
  taxIds: "Tax ids",
  taxExempt: "Tax",
  taxExemptionRequested: "Tax exemption",
  "taxExemptionRequested.note": "Why you ask for tax exemption",
};

const labelOf = (path: PropertyKey[]) => {
  const key = path.map(String).join(".");
  if (path[0] === "taxIds" && path.length > 1) return `Tax id ${Number(path[1]) + 1}`;
  return LABELS[key] ?? key;
};

function valuesOf(customer: CustomerRow): DetailsValues {
  const a = customer.address;
  return {
    email: customer.email,
    name: customer.name ?? "",
    line1: a?.line1 ?? "",
    line2: a?.line2 ?? "",
    city: a?.city ?? "",
    postalCode: a?.postalCode ?? "",
    state: a?.state ?? "",
    country: a?.country ?? "",
    taxIds: customer.taxIds ?? [],
    taxExempt: customer.taxExempt === "exempt" ? null : customer.taxExempt,
    exemptionAsked: customer.taxExemptionRequestedAt !== null,
    exemptionNote: customer.taxExemptionNote ?? "",
    exemptionRequestedAt: customer.taxExemptionRequestedAt,
  };
}

/**
 * The form as sent, kept as typed (shown again with an error). A customer the seller made exempt
 * is shown no choice of treatment and sends none; whatever a form claims, `updateCustomer` decides.
 */
function valuesFromForm(fields: Record<string, string>, customer: CustomerRow): DetailsValues {
  const f = (name: string) => (fields[name] ?? "").slice(0, 1000);
  const taxIds: DetailsValues["taxIds"] = [];
  for (let i = 0; i < 10; i++) {
    const type = f(`taxIdType${i}`).trim();
    const value = f(`taxIdValue${i}`).trim();
    if (type || value) taxIds.push({ type, value });
  }
  const exempt = customer.taxExempt === "exempt";
  return {
    email: f("email"),
    name: f("name"),
    line1: f("line1"),
    line2: f("line2"),
    city: f("city"),
    postalCode: f("postalCode"),
    state: f("state"),
    country: f("country"),
    taxIds,
    taxExempt: exempt && fields.taxExempt === undefined ? null : f("taxExempt") || "none",
    exemptionAsked: fields.taxExemptionRequested !== undefined,
    exemptionNote: f("taxExemptionNote"),
    exemptionRequestedAt: customer.taxExemptionRequestedAt,
  };
}

/** The change the form asks for, in `PATCH /api/billing/customer`'s shape (validated by the same schema). */
function changeOf(v: DetailsValues): unknown {
  const addressGiven = [v.line1, v.line2, v.city, v.postalCode, v.state, v.country].some((s) => s.trim() !== "");
  return {
    email: v.email.trim(),
    name: v.name.trim() === "" ? null : v.name,
    address: addressGiven ? { line1: v.line1, line2: v.line2 || null, city: v.city, postalCode: v.postalCode || null, state: v.state || null, country: v.country } : null,
    taxIds: v.taxIds,
    ...(v.taxExempt !== null ? { taxExempt: v.taxExempt } : {}),
    // the box ticked asks (or asks again, unchanged); unticked, a pending request is withdrawn
    ...(v.exemptionAsked ? { taxExemptionRequested: { note: v.exemptionNote } } : v.exemptionRequestedAt ? { taxExemptionRequested: null } : {}),
  };
}

const SAVED = { kind: "success" as const, text: "Billing details saved. Your next invoice names you this way." };

/**
 * The portal's billing details form (DESIGN §6.11), `GET/POST /portal/{id}/details`: the session id
 * in the address is the credential, as on the portal's other pages; a form from another origin is
 * refused; a saved form redirects back (POST/redirect/GET), a refused one shows the form again with
 * what was typed and why. And `GET /portal/open?platformId=`, the way into the portal from a mail or
 * IAM's account page: IAM's session cookie of a member with billing:manage makes a portal session.
 */
export function portalDetailsRoutes(app: ServiceApp, ctx: BillingContext) {
  const { engine } = ctx;

  async function sessionOf(c: Context): Promise<PortalSession | null> {
    return livePortalSession(engine.db, c.req.param("id") ?? "", engine.time.wallNow());
  }

  const expired = (c: Context) =>
    c.html("<!DOCTYPE html><title>Billing link expired</title><p>This billing link has expired: billing links last an hour. Open billing again from where you came from.</p>", 404, {
      "cache-control": "no-store",
      "content-security-policy": "default-src 'none'; frame-ancestors 'none'",
    });

  app.get("/portal/:id/details", async (c) => {
    const session = await sessionOf(c);
    if (!session) return expired(c);
    const customer = await findCustomer(engine.db, session.customerId);
    return renderBillingDetails(c, { base: `/portal/${session.id}`, values: valuesOf(customer), alert: c.req.query("saved") === "1" ? SAVED : null });
  });

  app.post("/portal/:id/details", async (c) => {
    const session = await sessionOf(c);
    if (!session) return expired(c);
    const base = `/portal/${session.id}`;
    const origin = c.req.header("origin");
    if (origin !== undefined && origin !== new URL(c.req.url).origin) {
      return renderBillingDetails(c, { base, values: valuesOf(await findCustomer(engine.db, session.customerId)), alert: { kind: "error", text: "This form did not come from this page: nothing was changed." } }, 403);
    }
    const type = (c.req.header("content-type") ?? "").split(";")[0]!.trim().toLowerCase();
    const raw = type === "application/x-www-form-urlencoded" || type === "multipart/form-data" ? await c.req.parseBody() : {};
    const fields = Object.fromEntries(Object.entries(raw).filter((e): e is [string, string] => typeof e[1] === "string"));
    const customer = await findCustomer(engine.db, session.customerId);
    const values = valuesFromForm(fields, customer);
    const parsed = BuyerPatch.safeParse(changeOf(values));
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      return renderBillingDetails(c, { base, values, alert: { kind: "error", text: `${labelOf(issue.path)}: ${issue.message}` } }, 400);
    }
    try {
      // the portal is the buyer's: it can ask for tax exemption, never grant it
      const { before, after } = await updateCustomer(engine, session.customerId, parsed.data as CustomerChange, "buyer");
      // audited as the API's changes are, the customer as the actor (the session's id is a credential: never written down)
      await auditOperatorAction(engine.db, { now: () => engine.time.wallNow() }, { actorType: "portal", actorId: before.id, action: "customer.update", targetType: "customer", targetId: before.id, before: customerJson(before), after: customerJson(after), requestId: requestIdOf(c) });
    } catch (err) {
      if (!(err instanceof ApiError) || err.status >= 500) throw err;
      return renderBillingDetails(c, { base, values, alert: { kind: "error", text: err.message } }, err.status as 400);
    }
    return c.redirect(`${base}/details?saved=1`, 303);
  });

  app.openapi(
    createRoute({
      method: "get",
      path: "/portal/open",
      summary: "The way into the customer portal from a browser (mails, IAM's account page): a portal session, then its page",
      description:
        "DESIGN §6.11. With IAM's session cookie (or any credential) of a member with billing:manage on the platform: a portal session as POST /portal makes, coming back to IAM's account page, and 303 to it. " +
        "Without a credential: 303 to IAM's sign-in, coming back here.",
      security: security.anyCredential,
      request: { query: z.object({ platformId: platformQuery(false) }) },
      responses: { 303: { description: "To the portal, or to IAM's sign-in" }, ...errorResponses(400, 401, 403, 404, 409, 429, 503) },
    }),
    async (c) => {
      const platformId = c.req.valid("query").platformId;
      if (!(await browserCallerOf(c, ctx.credentials))) {
        const back = new URL(c.req.path + new URL(c.req.url).search, ctx.config.billingUrl).href;
        return c.redirect(`${ctx.config.iamUrl}/sign-in?next=${encodeURIComponent(back)}`, 303);
      }
      const scope = await platformScope(c, ctx, "billing:manage", platformId);
      const customer = await platformCustomer(ctx, scope);
      const session = await engine.provider.createPortalSession({ customerId: customer.id, platformId: scope.platformId, returnUrl: `${ctx.config.iamUrl}/account` });
      return c.redirect(session.url, 303);
    },
  );
}
