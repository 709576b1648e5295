import { randomUUID } from "node:crypto";
import { createRoute, z } from "@hono/zod-openapi";
import type { Context } from "hono";
import { ApiError, conflict, errorResponses, jsonBody, jsonContent, security, traceOf, type ServiceApp } from "@core/kit";
import { platformScope } from "../access.js";
import type { BillingContext } from "../app.js";
import { cancelAtPeriodEnd, changePlan, previewJson, previewTierChange, upgrade } from "../changes.js";
import { PaymentPending } from "../collection.js";
import { atProvider, customerOfPlatform, detachCard, ensurePlatformCustomer, findCustomer, setDefaultCard } from "../customers.js";
import { finalizedInvoiceOf } from "../invoices.js";
import { invoiceJson, linesOf } from "../invoicing.js";
import { renderInvoicePage, renderInvoicePdf } from "../pages/invoice.js";
import { renderChange, renderMessage, renderPortal, type Alert } from "../pages/portal.js";
import { PAID_TIERS, type PaidTier } from "../plans.js";
import { payInvoice } from "../operator.js";
import { livePortalSession, portalView, type PortalSession } from "../portal.js";
import { retryOpenInvoicesNow } from "../renewals.js";
import { currentSubscription, findSubscription, toSecond } from "../subscriptions.js";
import { bothPrefixes } from "./answers.js";
import { platformQuery } from "./schemas.js";

const PortalInput = z
  .object({
    returnUrl: z
      .url({ protocol: /^https?$/ })
      .max(2048)
      .openapi({ description: "where the portal's Back link goes: an http(s) address" }),
  })
  .strict()
  .openapi("PortalInput");

const PortalAnswer = z.object({ id: z.string(), url: z.string().openapi({ description: "the portal page, valid for an hour" }) }).openapi("PortalSession");

/** What a person reads after each portal action (fixed texts: nothing from the address is echoed). */
/** What a person reads while a payment's outcome is not known yet (DESIGN §6.9). */
const PENDING_TEXT = "Your payment is being confirmed with the payment provider: nothing will be charged twice. This page shows the outcome once it is known, in a minute or two.";

const NOTICES: Record<string, Exclude<Alert, null>> = {
  card_added: { kind: "success", text: "Card added." },
  default_set: { kind: "success", text: "Default card changed. Any payment that failed was tried again with it." },
  card_removed: { kind: "success", text: "Card removed." },
  changed: { kind: "success", text: "Plan changed." },
  scheduled: { kind: "success", text: "The change will take effect at the end of this period." },
  kept: { kind: "success", text: "You stay on your plan: the waiting change was called off." },
  subscribed: { kind: "success", text: "Subscribed. The first month is paid." },
  canceled: { kind: "info", text: "Your plan is canceled: it stays until the end of this period, then the platform is on Free." },
  resumed: { kind: "success", text: "Your plan continues." },
  paid: { kind: "success", text: "Paid. Thank you." },
  debt_paid: { kind: "success", text: "Paid. Thank you. What was owed is settled; the plan that ended is not restored: choose a plan to subscribe again." },
};

/**
 * The customer portal (DESIGN §6.1): `POST /portal` makes a session of an hour for the platform's
 * customer, and `/portal/{id}` is our own server-rendered page, without JavaScript: plan and period,
 * the next charge, usage against the plan, invoices, cards, a plan change shown before it is
 * confirmed, cancel or resume. The session id in the address is the page's credential; forms post
 * only to the same origin.
 */
export function portalRoutes(app: ServiceApp, ctx: BillingContext) {
  const { engine } = ctx;

  for (const path of bothPrefixes("/portal")) {
    app.openapi(
      createRoute({
        method: "post",
        path,
        summary: "A customer portal session for the platform: our own billing page, valid for an hour",
        security: security.anyCredential,
        request: { query: z.object({ platformId: platformQuery(false) }), body: jsonBody(PortalInput) },
        responses: { 201: jsonContent(PortalAnswer, "The portal session"), ...errorResponses(400, 401, 403, 404, 409, 429, 503) },
      }),
      async (c) => {
        const scope = await platformScope(c, ctx, "billing:manage", c.req.valid("query").platformId);
        const now = await engine.time.now();
        let customer = await customerOfPlatform(engine.db, scope.platformId);
        if (!customer) {
          // only someone of the platform's own organization becomes its customer; an operator's email never does
          if (scope.caller.kind !== "principal" || scope.caller.principal.platformId !== scope.platformId || !scope.caller.principal.email) {
            throw conflict("NO_CUSTOMER", "The platform has no billing customer yet: its first upgrade makes one");
          }
          customer = await atProvider(
            engine,
            await ensurePlatformCustomer(engine.db, now, {
              platformId: scope.platformId,
              userId: scope.caller.principal.userId,
              email: scope.caller.principal.email,
              name: await ctx.platforms.nameOf(scope.platformId, traceOf(c)),
              currency: engine.catalogue.currency,
            }),
          );
        }
        return c.json(await engine.provider.createPortalSession({ customerId: customer.id, platformId: scope.platformId, returnUrl: c.req.valid("json").returnUrl }), 201);
      },
    );
  }

  /** The live session of the address, or a page saying the link is gone. */
  async function sessionOf(c: Context): Promise<PortalSession | Response> {
    const session = await livePortalSession(engine.db, c.req.param("id") ?? "", engine.time.wallNow());
    if (session) return session;
    return renderMessage(c, { title: "This billing link has expired", text: "Billing links last an hour. Open billing again from where you came from.", returnUrl: null }, 404);
  }

  /** A form posted from anywhere but this page's own origin is refused (the id is the credential, and stays so). */
  function foreignOrigin(c: Context): boolean {
    const origin = c.req.header("origin");
    return origin !== undefined && origin !== new URL(c.req.url).origin;
  }

  async function form(c: Context): Promise<Record<string, string>> {
    const type = (c.req.header("content-type") ?? "").split(";")[0]!.trim().toLowerCase();
    if (type !== "application/x-www-form-urlencoded" && type !== "multipart/form-data") return {};
    const raw = await c.req.parseBody();
    return Object.fromEntries(Object.entries(raw).filter((e): e is [string, string] => typeof e[1] === "string"));
  }

  /**
   * A portal action: the session checked, then `act`; success answers a redirect to the page
   * (POST/redirect/GET, so a reload repeats nothing), a refusal the page again with its message.
   */
  const action = (act: (c: Context, session: PortalSession, fields: Record<string, string>) => Promise<string | Response>) => async (c: Context) => {
    const session = await sessionOf(c);
    if (session instanceof Response) return session;
    if (foreignOrigin(c)) return renderMessage(c, { title: "Request refused", text: "This form did not come from this page.", returnUrl: session.returnUrl }, 403);
    try {
      const outcome = await act(c, session, await form(c));
      return typeof outcome === "string" ? c.redirect(`/portal/${session.id}?notice=${outcome}`, 303) : outcome;
    } catch (err) {
      // the provider has not said yet: nothing is charged twice, and the page shows it being confirmed (DESIGN §6.9)
      if (err instanceof PaymentPending) return renderPortal(c, await portalView(engine, session), { kind: "info", text: PENDING_TEXT }, 202);
      if (!(err instanceof ApiError) || err.status >= 500) throw err;
      return renderPortal(c, await portalView(engine, session), { kind: "error", text: err.message }, err.status as 400);
    }
  };

  app.get("/portal/:id", async (c) => {
    const session = await sessionOf(c);
    if (session instanceof Response) return session;
    const notice = c.req.query("notice");
    return renderPortal(c, await portalView(engine, session), notice && Object.hasOwn(NOTICES, notice) ? NOTICES[notice]! : null);
  });

  const setDefault = async (customerId: string, paymentMethodId: string) => {
    await setDefaultCard(engine, customerId, paymentMethodId);
    await retryOpenInvoicesNow(engine, customerId);
  };

  app.post(
    "/portal/:id/cards",
    action(async (_c, session, fields) => {
      const customer = await findCustomer(engine.db, session.customerId);
      const card = await engine.provider.attach(customer.id, (fields.token ?? "").slice(0, 128));
      // the first card is the one renewals charge
      if (!customer.defaultPaymentMethodId) await setDefault(customer.id, card.id);
      return "card_added";
    }),
  );

  app.post(
    "/portal/:id/cards/:pm/default",
    action(async (c, session) => {
      const pm = await engine.provider.find(c.req.param("pm") ?? "");
      if (!pm || pm.customerId !== session.customerId) throw new ApiError(404, "NOT_FOUND", "That card is not one of yours");
      await setDefault(session.customerId, pm.id);
      return "default_set";
    }),
  );

  app.post(
    "/portal/:id/cards/:pm/remove",
    action(async (c, session) => {
      const pm = await engine.provider.find(c.req.param("pm") ?? "");
      if (!pm || pm.customerId !== session.customerId) throw new ApiError(404, "NOT_FOUND", "That card is not one of yours");
      await detachCard(engine, session.customerId, pm.id);
      return "card_removed";
    }),
  );

  app.post(
    "/portal/:id/cancel",
    action(async (_c, session) => {
      await cancelAtPeriodEnd(engine, session.platformId, true);
      return "canceled";
    }),
  );

  app.post(
    "/portal/:id/resume",
    action(async (_c, session) => {
      await cancelAtPeriodEnd(engine, session.platformId, false);
      return "resumed";
    }),
  );

  const paidTier = (value: string | undefined): PaidTier | null => (PAID_TIERS as readonly string[]).includes(value ?? "") ? (value as PaidTier) : null;

  /** The change page of a tier: the preview of a paid plan's change, or a free platform's first charge. */
  async function changePage(c: Context, session: PortalSession, tier: PaidTier, alert: Alert, status: 200 | 409 = 200) {
    const now = toSecond(await engine.time.now());
    const subscription = await currentSubscription(engine.db, engine.catalogue, session.platformId, now);
    const customer = await findCustomer(engine.db, session.customerId);
    const plan = engine.catalogue.plan(tier);
    const common = { base: `/portal/${session.id}`, returnUrl: session.returnUrl, currency: customer.currency, planName: plan.name, tier, key: randomUUID(), alert };
    if (subscription.tier === "free") {
      const card = customer.defaultPaymentMethodId ? await engine.provider.find(customer.defaultPaymentMethodId) : null;
      return renderChange(c, { ...common, preview: null, subscribe: { priceCents: plan.priceCents, card: card ? `${card.card.brand} •••• ${card.card.last4}` : null } }, status);
    }
    return renderChange(c, { ...common, preview: previewJson(await previewTierChange(engine, session.platformId, tier)), subscribe: null }, status);
  }

  app.get("/portal/:id/change", async (c) => {
    const session = await sessionOf(c);
    if (session instanceof Response) return session;
    const tier = paidTier(c.req.query("tier"));
    if (!tier) return renderPortal(c, await portalView(engine, session), { kind: "error", text: "Choose one of the plans below." }, 400);
    try {
      return await changePage(c, session, tier, null);
    } catch (err) {
      if (!(err instanceof ApiError) || err.status >= 500) throw err;
      return renderPortal(c, await portalView(engine, session), { kind: "error", text: err.message }, err.status as 409);
    }
  });

  app.post(
    "/portal/:id/change",
    action(async (c, session, fields) => {
      const tier = paidTier(fields.tier);
      if (!tier) throw new ApiError(400, "VALIDATION_ERROR", "Choose one of the plans.");
      const integer = (value: string | undefined) => (value && /^[0-9]{1,15}$/.test(value) ? Number(value) : undefined);
      const key = fields.key && /^[0-9a-f-]{36}$/.test(fields.key) ? fields.key : undefined;
      const now = toSecond(await engine.time.now());
      const subscription = await currentSubscription(engine.db, engine.catalogue, session.platformId, now);
      const customer = await findCustomer(engine.db, session.customerId);
      try {
        // the form's key makes a second submit (a double click, a reload) answer the first: one charge
        const keyed = await ctx.idempotency.run(
          { caller: `portal:${session.customerId}`, route: "/portal/change", key, request: { tier, prorationDate: fields.prorationDate ?? null, expected: fields.expectedAmountDueCents ?? null } },
          async (requestKey) => {
            if (subscription.tier === "free") {
              if (!customer.defaultPaymentMethodId) throw conflict("PAYMENT_METHOD_REQUIRED", "Add a card first.");
              await upgrade(engine, {
                platformId: session.platformId,
                userId: customer.userId,
                planId: engine.catalogue.plan(tier).id,
                paymentMethodId: customer.defaultPaymentMethodId,
                billingEmail: customer.email,
                requestKey,
              });
              return { status: 200, body: { notice: "subscribed" } };
            }
            const result = await changePlan(engine, {
              platformId: session.platformId,
              tier,
              prorationDate: integer(fields.prorationDate),
              expectedAmountDueCents: integer(fields.expectedAmountDueCents),
              requestKey,
            });
            const s = result.subscription;
            return { status: 200, body: { notice: s.tier === tier ? (tier === subscription.tier ? "kept" : "changed") : "scheduled" } };
          },
        );
        if (keyed.status >= 400) {
          const stored = (keyed.body as { error: { code: string; message: string } }).error;
          throw new ApiError(keyed.status as 402, stored.code, stored.message);
        }
        return (keyed.body as { notice: string }).notice;
      } catch (err) {
        // the amount moved since the preview: show the new one, charge nothing
        if (err instanceof ApiError && err.code === "AMOUNT_CHANGED") return changePage(c, session, tier, { kind: "error", text: "The amount changed since you looked. Here is the new one: nothing was charged." }, 409);
        throw err;
      }
    }),
  );

  app.post(
    "/portal/:id/invoices/:invoiceId/pay",
    action(async (c, session, fields) => {
      const key = fields.key && /^[0-9a-f-]{36}$/.test(fields.key) ? fields.key : undefined;
      const invoiceId = c.req.param("invoiceId") ?? "";
      const paymentMethodId = fields.paymentMethodId && /^[A-Za-z0-9_]{1,128}$/.test(fields.paymentMethodId) ? fields.paymentMethodId : undefined;
      // the form's key makes a second submit (a double click, a reload) answer the first: one charge
      const keyed = await ctx.idempotency.run({ caller: `portal:${session.customerId}`, route: "/portal/pay", key, request: { invoiceId, paymentMethodId: paymentMethodId ?? null } }, async (requestKey) => {
        const paid = await payInvoice(engine, invoiceId, { platformId: session.platformId, ...(paymentMethodId ? { paymentMethodId } : {}) }, requestKey);
        // an invoice of a plan that has ended (dunning made it uncollectible) is a debt: paying it restores nothing (ADR 0021), and the page says so
        const ended = paid.subscriptionId !== null && !(await findSubscription(engine.db, paid.subscriptionId)).current;
        return { status: 200, body: { notice: ended ? "debt_paid" : "paid" } };
      });
      if (keyed.status >= 400) {
        const stored = (keyed.body as { error: { code: string; message: string } }).error;
        throw new ApiError(keyed.status as 402, stored.code, stored.message);
      }
      return (keyed.body as { notice: string }).notice;
    }),
  );

  app.get("/portal/:id/invoices/:invoiceId", async (c) => {
    const session = await sessionOf(c);
    if (session instanceof Response) return session;
    const row = await finalizedInvoiceOf(engine.db, session.platformId, c.req.param("invoiceId"));
    if (!row) return renderMessage(c, { title: "Invoice not found", text: "There is no such invoice on this account.", returnUrl: `/portal/${session.id}` }, 404);
    return renderInvoicePage(c, invoiceJson(row, await linesOf(engine.db, row.id)));
  });

  // the same PDF as GET /invoices/{id}/pdf, opened with the portal session
  app.get("/portal/:id/invoices/:invoiceId/pdf", async (c) => {
    const session = await sessionOf(c);
    if (session instanceof Response) return session;
    const row = await finalizedInvoiceOf(engine.db, session.platformId, c.req.param("invoiceId"));
    if (!row) return renderMessage(c, { title: "Invoice not found", text: "There is no such invoice on this account.", returnUrl: `/portal/${session.id}` }, 404);
    return renderInvoicePdf(c, invoiceJson(row, await linesOf(engine.db, row.id)));
  });
}
