import { createRoute, z } from "@hono/zod-openapi";
import { errorResponses, jsonBody, jsonContent, security, unixSeconds, type ServiceApp } from "@core/kit";
import { auditRequest, requireOperator } from "../access.js";
import type { BillingContext } from "../app.js";

const ClockSchema = z.object({ enabled: z.literal(true), offsetSeconds: z.number().int(), now: z.number().int().openapi({ description: "billing time, Unix seconds" }) }).openapi("TestClock");

/** Ten years: far enough for any test of renewals, near enough that dates stay sane. */
const MAX_ADVANCE_SECONDS = 10 * 366 * 86_400;

/**
 * The test clock (DESIGN §6.3), only with CORE_BILLING_TEST_CLOCK=1: billing time is the wall clock
 * plus an offset shared by every replica. An advance runs everything that falls due inside it —
 * renewals, trial ends, retries — in time order, before it answers.
 */
export function testClockRoutes(app: ServiceApp, ctx: BillingContext) {
  const { time } = ctx.engine;
  const answer = async () => ({ enabled: true as const, offsetSeconds: await time.offsetSeconds(), now: unixSeconds(await time.now()) });

  app.openapi(
    createRoute({
      method: "get",
      path: "/operator/test-clock",
      summary: "Billing time and the test clock's offset (only with CORE_BILLING_TEST_CLOCK=1)",
      security: security.anyCredential,
      responses: { 200: jsonContent(ClockSchema, "The test clock"), ...errorResponses(401, 403) },
    }),
    async (c) => {
      await requireOperator(c, ctx.credentials);
      return c.json(await answer(), 200);
    },
  );

  app.openapi(
    createRoute({
      method: "post",
      path: "/operator/test-clock/advance",
      summary: "Move billing time forward (never back) and run everything that falls due inside the advance before answering (only with CORE_BILLING_TEST_CLOCK=1)",
      security: security.anyCredential,
      request: { body: jsonBody(z.object({ seconds: z.number().int().gt(0).max(MAX_ADVANCE_SECONDS) }).strict().openapi("TestClockAdvance")) },
      responses: { 200: jsonContent(ClockSchema, "The test clock after the advance"), ...errorResponses(401, 403) },
    }),
    async (c) => {
      const caller = await requireOperator(c, ctx.credentials);
      const { seconds } = c.req.valid("json");
      const before = await time.offsetSeconds();
      await time.advance(seconds);
      await ctx.worker.pass();
      const after = await answer();
      await auditRequest(c, ctx.engine, caller, { action: "test_clock.advance", targetType: "test_clock", targetId: "billing", before: { offsetSeconds: before }, after: { offsetSeconds: after.offsetSeconds } });
      return c.json(after, 200);
    },
  );
}
