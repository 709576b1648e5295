import { createRoute, z } from "@hono/zod-openapi";
import { jsonContent, type ServiceApp } from "@core/kit";
import type { BillingContext } from "../app.js";
import { BILLING_STYLESHEET_PATH } from "../pages/invoice.js";
import { BILLING_STYLESHEET } from "../pages/stylesheet.js";
import { PlanSchema } from "./schemas.js";

/** `GET /plans` (spec §4.4, DESIGN §6.2): the price list, readable without a credential. */
export function planRoutes(app: ServiceApp, ctx: BillingContext) {
  app.openapi(
    createRoute({
      method: "get",
      path: "/plans",
      summary: "The available plans: a price list, readable by anyone",
      responses: { 200: jsonContent(z.array(PlanSchema), "Every plan, free first") },
    }),
    (c) => c.json(ctx.engine.catalogue.plans, 200),
  );
  // the stylesheet of billing's pages (HTML, not API: outside the description)
  app.get(BILLING_STYLESHEET_PATH, (c) => c.body(BILLING_STYLESHEET, 200, { "content-type": "text/css; charset=utf-8", "cache-control": "public, max-age=3600" }));
}
