import type { Context } from "hono";
import { createRoute, z } from "@hono/zod-openapi";
import { browserCallerOf } from "@core/service-auth";
import { cursorParam, errorResponses, jsonContent, limitParam, resourceNotFound, security, type ServiceApp } from "@core/kit";
import { platformScope, resourceScope } from "../access.js";
import type { BillingContext } from "../app.js";
import { creditNoteJson, creditNotesOf } from "../credit-notes.js";
import type { InvoiceRow } from "../db/schema.js";
import { invoiceById, listInvoices } from "../invoices.js";
import { invoiceJson, linesOf } from "../invoicing.js";
import { renderInvoicePage, renderInvoicePdf } from "../pages/invoice.js";
import { upcomingInvoice } from "../upcoming.js";
import { bothPrefixes } from "./answers.js";
import { CreditNoteSchema, InvoiceSchema, pathId, platformQuery, UpcomingInvoiceSchema } from "./schemas.js";

/** Table A's invoice rows (spec §4.4; DESIGN §6.4, §6.9): a page of the platform's invoices, the upcoming one, one invoice, its printable page. */
export function invoiceRoutes(app: ServiceApp, ctx: BillingContext) {
  const { db } = ctx.engine;

  /** An invoice the caller may read: finalized, of the platform in scope (404 otherwise, as if it did not exist, naming nothing of its owner). */
  async function readable(c: Parameters<typeof platformScope>[0], id: string, named: string | undefined): Promise<InvoiceRow> {
    const row = await invoiceById(db, id);
    const scoped = await resourceScope(c, ctx, "billing:read", named, row?.platformId ?? null);
    if (!row || !scoped || row.status === "draft" || row.platformId !== scoped.platformId) throw resourceNotFound("invoice");
    return row;
  }

  /**
   * A page a browser opens (the invoice, its PDF; DESIGN §6.11): the request's credential, or IAM's
   * session cookie. Without either, a browser (it asks for HTML) is sent to IAM's sign-in with a way
   * back here; other clients get 401 as from every route. Null: the redirect to answer.
   */
  async function browserAccess(c: Context): Promise<Response | null> {
    if (await browserCallerOf(c, ctx.credentials)) return null;
    if (!(c.req.header("accept") ?? "").includes("text/html")) return null;
    const back = new URL(c.req.path + new URL(c.req.url).search, ctx.config.billingUrl).href;
    return c.redirect(`${ctx.config.iamUrl}/sign-in?next=${encodeURIComponent(back)}`, 303);
  }

  for (const path of bothPrefixes("/invoices")) {
    app.openapi(
      createRoute({
        method: "get",
        path,
        summary: "The platform's invoices, newest first; cursor is null on the last page",
        security: security.anyCredential,
        request: { query: z.object({ platformId: platformQuery(true), cursor: cursorParam(), limit: limitParam(25, 100) }) },
        responses: {
          200: jsonContent(z.object({ data: z.array(InvoiceSchema), cursor: z.string().nullable() }).openapi("InvoicePage"), "A page of invoices"),
          ...errorResponses(401, 403, 404, 429, 503),
        },
      }),
      async (c) => {
        const query = c.req.valid("query");
        const { platformId } = await platformScope(c, ctx, "billing:read", query.platformId);
        return c.json(await listInvoices(db, platformId, query), 200);
      },
    );
  }

  for (const path of bothPrefixes("/invoices/upcoming")) {
    app.openapi(
      createRoute({
        method: "get",
        path,
        summary: "The invoice the next renewal will make: the next period at the waiting tier and seats, this period's overage so far, tax and credit; what the card will be charged",
        description:
          "DESIGN §6.9: in the invoice's shape with id and number null and status upcoming, with nextChargeAt. Every next charge shown (the portal, core billing status) is its amountDueCents. " +
          "404 NO_UPCOMING_INVOICE when nothing will be charged (on free, or ending at the period's end).",
        security: security.anyCredential,
        request: { query: z.object({ platformId: platformQuery(false) }) },
        responses: { 200: jsonContent(UpcomingInvoiceSchema, "The upcoming invoice"), ...errorResponses(401, 403, 404, 429, 503) },
      }),
      async (c) => {
        const { platformId } = await platformScope(c, ctx, "billing:read", c.req.valid("query").platformId);
        return c.json(await upcomingInvoice(ctx.engine, platformId), 200);
      },
    );
  }

  for (const path of bothPrefixes("/invoices/{id}")) {
    app.openapi(
      createRoute({
        method: "get",
        path,
        summary: "One invoice with its lines: with platformId it must belong to that platform, without it to the caller's (operators: any)",
        description: "The spec's two invoice rows (/invoices/{id} and /invoices/{invoiceId}) are this one route (DESIGN §6.4).",
        security: security.anyCredential,
        request: { params: z.object({ id: pathId("id") }), query: z.object({ platformId: platformQuery(false) }) },
        responses: { 200: jsonContent(InvoiceSchema, "The invoice"), ...errorResponses(401, 403, 404, 429, 503) },
      }),
      async (c) => {
        const row = await readable(c, c.req.valid("param").id, c.req.valid("query").platformId);
        return c.json(invoiceJson(row, await linesOf(db, row.id)), 200);
      },
    );
  }

  for (const path of bothPrefixes("/invoices/{id}/credit-notes")) {
    app.openapi(
      createRoute({
        method: "get",
        path,
        summary: "The invoice's credit notes, in the order they were issued (who may read the invoice may read them)",
        security: security.anyCredential,
        request: { params: z.object({ id: pathId("id") }), query: z.object({ platformId: platformQuery(false) }) },
        responses: { 200: jsonContent(z.object({ data: z.array(CreditNoteSchema) }).openapi("CreditNoteList"), "The credit notes"), ...errorResponses(401, 403, 404, 429, 503) },
      }),
      async (c) => {
        const row = await readable(c, c.req.valid("param").id, c.req.valid("query").platformId);
        return c.json({ data: (await creditNotesOf(db, row.id)).map(creditNoteJson) }, 200);
      },
    );
  }

  // the invoice as a person files it (DESIGN §6.11): one page, two forms, opened alike
  const documents = [
    {
      suffix: "html",
      summary: "The invoice as a printable HTML page: seller, buyer, lines with quantity, unit price and tax rate, tax base, tax and totals",
      description:
        "DESIGN §6.11: also opens with IAM's session cookie of a member who may read billing; a browser without a credential is sent (303) to IAM's sign-in, coming back here.",
      ok: { description: "An HTML page", content: { "text/html": { schema: z.string() } } },
      render: renderInvoicePage,
    },
    {
      suffix: "pdf",
      summary: "The invoice as a PDF: the same content as its HTML page",
      description:
        "DESIGN §6.11: made in process (pdfkit), access as GET /invoices/{id}; also opens with IAM's session cookie of a member who may read billing, and a browser without a credential is sent (303) to IAM's sign-in.",
      ok: { description: "The invoice as a PDF", content: { "application/pdf": { schema: z.string().openapi({ format: "binary" }) } } },
      render: renderInvoicePdf,
    },
  ];
  for (const document of documents) {
    for (const path of bothPrefixes(`/invoices/{id}/${document.suffix}`)) {
      app.openapi(
        createRoute({
          method: "get",
          path,
          summary: document.summary,
          description: document.description,
          security: security.anyCredential,
          request: { params: z.object({ id: pathId("id") }), query: z.object({ platformId: platformQuery(false) }) },
          responses: {
            200: document.ok,
            303: { description: "A browser without a credential: to IAM's sign-in" },
            ...errorResponses(401, 403, 404, 429, 503),
          },
        }),
        async (c) => {
          const away = await browserAccess(c);
          if (away) return away;
          const row = await readable(c, c.req.valid("param").id, c.req.valid("query").platformId);
          return document.render(c, invoiceJson(row, await linesOf(db, row.id)));
        },
      );
    }
  }
}
