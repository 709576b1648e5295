import { createRoute, z } from "@hono/zod-openapi";
import { badRequest, cursorParam, decodeCursor, errorResponses, jsonContent, limitParam, security, toPage, unixSeconds, type ServiceApp } from "@core/kit";
import { platformScope } from "../access.js";
import type { BillingContext } from "../app.js";
import type { Tier } from "../plans.js";
import { currentSubscription, toSecond } from "../subscriptions.js";
import { currentAlerts, currentUsage, dailyUsage, DAY_MS, dayOf, metersOf, stackUsage, usageHistory, usageTenants } from "../usage.js";
import { bothPrefixes } from "./answers.js";
import { Id, pathId, platformQuery } from "./schemas.js";

const Seconds = z.number().int().openapi({ description: "Unix seconds" });
const Quantity = z.string().openapi({ description: "a decimal string (\"1\", \"0.3\"): never rounded" });
const tenantQuery = Id.optional().openapi({ param: { name: "tenantId", in: "query" }, description: "only this tenant's usage" });
const Day = z
  .string()
  .regex(/^\d{4}-\d{2}-\d{2}$/, "a date such as 2026-02-14")
  .refine((d) => d >= "1970-01-01" && !Number.isNaN(Date.parse(`${d}T00:00:00Z`)) && new Date(`${d}T00:00:00Z`).toISOString().startsWith(d), "a real calendar date from 1970-01-01 on");

/** The most days one `usage/daily` answer covers, both ends counted (DESIGN §6.5). */
const MAX_DAYS = 366;

const MeterUsage = z.object({ meter: z.string(), quantity: Quantity });
const DailyPoint = z.object({ date: z.string(), meter: z.string(), quantity: Quantity }).openapi("DailyUsagePoint");

const CurrentUsageSchema = z
  .object({
    platformId: z.string(),
    tenantId: z.string().nullable(),
    periodStart: Seconds,
    periodEnd: Seconds,
    meters: z.array(z.object({ meter: z.string(), quantity: Quantity, included: Quantity, overage: Quantity, overageCents: z.number().int() })),
    estimatedOverageCents: z.number().int(),
  })
  .openapi("UsageSnapshot");

const HistoryRow = z.object({ periodStart: Seconds, periodEnd: Seconds, meter: z.string(), quantity: Quantity }).openapi("UsageHistoryRow");
const Entity = z.object({ tenantId: z.string(), firstSeenAt: Seconds, lastSeenAt: Seconds }).openapi("UsageEntity");
const Alert = z
  .object({ id: z.string(), meter: z.string(), thresholdPercent: z.number().int(), quantity: Quantity, included: Quantity, triggeredAt: Seconds })
  .openapi("UsageAlert");
const StackMeters = z.object({ stackId: z.string().nullable().openapi({ description: "null: usage reported without a stack" }), meters: z.array(MeterUsage) });

/**
 * Table A's usage reads (spec §4.4, DESIGN §6.5), from the daily rollups that ingestion fills. A
 * platform without usage answers its period with zeros: these are its real figures.
 */
export function usageRoutes(app: ServiceApp, ctx: BillingContext) {
  const { engine } = ctx;
  const subscriptionOf = async (platformId: string) => currentSubscription(engine.db, engine.catalogue, platformId, toSecond(await engine.time.now()));

  for (const path of bothPrefixes("/usage/current")) {
    app.openapi(
      createRoute({
        method: "get",
        path,
        summary: "This period's usage of each meter against what the plan includes, and the overage it would cost",
        security: security.anyCredential,
        request: { query: z.object({ platformId: platformQuery(true), tenantId: tenantQuery }) },
        responses: { 200: jsonContent(CurrentUsageSchema, "The usage snapshot"), ...errorResponses(401, 403, 404, 429, 503) },
      }),
      async (c) => {
        const query = c.req.valid("query");
        const { platformId } = await platformScope(c, ctx, "billing:read", query.platformId);
        return c.json(await currentUsage(engine.db, engine.catalogue, await subscriptionOf(platformId), query.tenantId), 200);
      },
    );
  }

  for (const path of bothPrefixes("/usage/daily")) {
    app.openapi(
      createRoute({
        method: "get",
        path,
        summary: "Usage per UTC day and meter from `from` to `to`, both included, zeros included (at most 366 days)",
        security: security.anyCredential,
        request: {
          query: z.object({
            platformId: platformQuery(true),
            tenantId: tenantQuery,
            from: Day.openapi({ param: { name: "from", in: "query" }, example: "2026-02-01" }),
            to: Day.openapi({ param: { name: "to", in: "query" }, example: "2026-02-28" }),
          }),
        },
        responses: { 200: jsonContent(z.object({ data: z.array(DailyPoint) }).openapi("DailyUsage"), "The daily series"), ...errorResponses(401, 403, 404, 429, 503) },
      }),
      async (c) => {
        const query = c.req.valid("query");
        const days = (Date.parse(query.to) - Date.parse(query.from)) / DAY_MS + 1;
        if (days < 1) throw badRequest("`from` must not come after `to`", { path: "from" });
        if (days > MAX_DAYS) throw badRequest(`At most ${MAX_DAYS} days at once: ${days} asked`, { path: "to" });
        const { platformId } = await platformScope(c, ctx, "billing:read", query.platformId);
        const plan = engine.catalogue.plan((await subscriptionOf(platformId)).tier as Tier);
        return c.json({ data: await dailyUsage(engine.db, platformId, metersOf(plan), query.from, query.to, { tenantId: query.tenantId }) }, 200);
      },
    );
  }

  for (const path of bothPrefixes("/usage/history")) {
    app.openapi(
      createRoute({
        method: "get",
        path,
        summary: "Usage of each closed period and meter, newest period first; cursor is null on the last page",
        security: security.anyCredential,
        request: { query: z.object({ platformId: platformQuery(false), limit: limitParam(25, 100), cursor: cursorParam(), tenantId: tenantQuery }) },
        responses: { 200: jsonContent(z.object({ data: z.array(HistoryRow), cursor: z.string().nullable() }).openapi("UsageHistoryPage"), "A page of usage history"), ...errorResponses(401, 403, 404, 429, 503) },
      }),
      async (c) => {
        const query = c.req.valid("query");
        const after = decodeCursor(query.cursor, { key: "timestamp", tie: "id" });
        const { platformId } = await platformScope(c, ctx, "billing:read", query.platformId);
        const subscription = await subscriptionOf(platformId);
        const rows = await usageHistory(engine.db, platformId, subscription.currentPeriodStart, query.limit, after, query.tenantId);
        const page = toPage(rows, query.limit, (r) => ({ k: r.periodStart, id: r.meter }));
        return c.json({ data: page.data.map((r) => ({ periodStart: unixSeconds(r.periodStart), periodEnd: unixSeconds(r.periodEnd), meter: r.meter, quantity: r.quantity })), cursor: page.cursor }, 200);
      },
    );
  }

  for (const path of bothPrefixes("/usage/entities")) {
    app.openapi(
      createRoute({
        method: "get",
        path,
        summary: "The tenants that have usage, by id; cursor is null on the last page",
        security: security.anyCredential,
        request: { query: z.object({ platformId: platformQuery(false), limit: limitParam(25, 100), cursor: cursorParam() }) },
        responses: { 200: jsonContent(z.object({ data: z.array(Entity), cursor: z.string().nullable() }).openapi("UsageEntityPage"), "A page of tenants"), ...errorResponses(401, 403, 404, 429, 503) },
      }),
      async (c) => {
        const query = c.req.valid("query");
        const after = decodeCursor(query.cursor, { key: "text", tie: "text" });
        const { platformId } = await platformScope(c, ctx, "billing:read", query.platformId);
        const rows = await usageTenants(engine.db, platformId, query.limit, after?.k ?? null);
        const page = toPage(rows, query.limit, (r) => ({ k: r.tenantId, id: r.tenantId }));
        return c.json({ data: page.data.map((r) => ({ tenantId: r.tenantId, firstSeenAt: unixSeconds(r.firstSeenAt), lastSeenAt: unixSeconds(r.lastSeenAt) })), cursor: page.cursor }, 200);
      },
    );
  }

  for (const path of bothPrefixes("/usage/alerts")) {
    app.openapi(
      createRoute({
        method: "get",
        path,
        summary: "The usage alerts of the current period: 80 % and 100 % of a meter's included quantity, each once",
        security: security.anyCredential,
        request: { query: z.object({ platformId: platformQuery(true) }) },
        responses: { 200: jsonContent(z.object({ data: z.array(Alert) }).openapi("UsageAlertList"), "The alerts"), ...errorResponses(401, 403, 404, 429, 503) },
      }),
      async (c) => {
        const { platformId } = await platformScope(c, ctx, "billing:read", c.req.valid("query").platformId);
        return c.json({ data: await currentAlerts(engine.db, await subscriptionOf(platformId)) }, 200);
      },
    );
  }

  for (const path of bothPrefixes("/usage-summary")) {
    app.openapi(
      createRoute({
        method: "get",
        path,
        summary: "This period's usage per stack and meter",
        security: security.anyCredential,
        request: { query: z.object({ platformId: platformQuery(true) }) },
        responses: {
          200: jsonContent(z.object({ platformId: z.string(), periodStart: Seconds, periodEnd: Seconds, stacks: z.array(StackMeters) }).openapi("UsageSummary"), "The per-stack summary"),
          ...errorResponses(401, 403, 404, 429, 503),
        },
      }),
      async (c) => {
        const { platformId } = await platformScope(c, ctx, "billing:read", c.req.valid("query").platformId);
        const subscription = await subscriptionOf(platformId);
        const stacks = new Map<string, { meter: string; quantity: string }[]>();
        for (const row of await stackUsage(engine.db, subscription)) {
          const meters = stacks.get(row.stackId) ?? [];
          meters.push({ meter: row.meter, quantity: row.quantity });
          stacks.set(row.stackId, meters);
        }
        return c.json(
          {
            platformId,
            periodStart: unixSeconds(subscription.currentPeriodStart),
            periodEnd: unixSeconds(subscription.currentPeriodEnd),
            stacks: [...stacks].map(([stackId, meters]) => ({ stackId: stackId === "" ? null : stackId, meters })),
          },
          200,
        );
      },
    );
  }

  for (const path of bothPrefixes("/platforms/{platformId}/stacks/{stackId}/usage")) {
    app.openapi(
      createRoute({
        method: "get",
        path,
        summary: "One stack's usage this period: each meter of the plan, and its daily series from the period's first day to today (this period's usage only, so the series sums to the meters)",
        security: security.anyCredential,
        request: { params: z.object({ platformId: pathId("platformId"), stackId: pathId("stackId") }) },
        responses: {
          200: jsonContent(
            z.object({ platformId: z.string(), stackId: z.string(), periodStart: Seconds, periodEnd: Seconds, meters: z.array(MeterUsage), daily: z.array(DailyPoint) }).openapi("StackUsage"),
            "The stack's usage",
          ),
          ...errorResponses(401, 403, 404, 429, 503),
        },
      }),
      async (c) => {
        const params = c.req.valid("param");
        const { platformId } = await platformScope(c, ctx, "billing:read", params.platformId);
        const now = toSecond(await engine.time.now());
        const subscription = await currentSubscription(engine.db, engine.catalogue, platformId, now);
        const meters = metersOf(engine.catalogue.plan(subscription.tier as Tier));
        const used = new Map((await stackUsage(engine.db, subscription, params.stackId)).map((r) => [r.meter, r.quantity]));
        const lastDay = now < subscription.currentPeriodEnd ? now : subscription.currentPeriodEnd;
        return c.json(
          {
            platformId,
            stackId: params.stackId,
            periodStart: unixSeconds(subscription.currentPeriodStart),
            periodEnd: unixSeconds(subscription.currentPeriodEnd),
            meters: meters.map((meter) => ({ meter, quantity: used.get(meter) ?? "0" })),
            daily: await dailyUsage(engine.db, platformId, meters, dayOf(subscription.currentPeriodStart), dayOf(lastDay), {
              stackId: params.stackId,
              periodStart: subscription.currentPeriodStart,
            }),
          },
          200,
        );
      },
    );
  }
}
