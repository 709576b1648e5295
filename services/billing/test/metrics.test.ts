import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabases } from "@core/storage";
import { parsePrometheus, valueOf } from "../../../packages/kit/test/support/prometheus.js";
import { startBilling, unique, type Billing, type Headers } from "./support/billing.js";

/** A webhook receiver on 127.0.0.1 that answers `status` to everything. */
async function receiver(status = 200): Promise<{ url: string; close: () => Promise<void> }> {
  const server: Server = createServer((req, res) => {
    req.resume();
    req.on("end", () => res.writeHead(status).end("ok"));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/**
 * Billing's metrics (DESIGN §10, docs/vault/cross-cutting/observability.md): named as documented, and
 * moving with what billing does — a webhook delivery written and delivered, a payment's outcome, a
 * payment in flight, usage events by result, a worker's pass.
 */
describe.each(testDatabases())("billing's metrics ($name)", (database) => {
  let b: Billing;
  let op: Headers;
  beforeAll(async () => {
    b = await startBilling(database);
    op = b.as.operator();
  });
  afterAll(() => b?.close());

  const scrape = async () => {
    const res = await b.app.request("/metrics");
    expect(res.status).toBe(200);
    return parsePrometheus(await res.text());
  };
  const counted = async (name: string, labels: Record<string, string> = {}) => valueOf((await scrape()).samples, name, labels) ?? 0;

  it("describes every metric of DESIGN §10 and reads each worker job's backlog from the database", async () => {
    const { samples, described } = await scrape();
    for (const name of [
      "core_billing_collection_outcomes_total",
      "core_billing_collections_pending",
      "core_billing_collection_oldest_pending_age_seconds",
      "core_billing_webhook_deliveries_pending",
      "core_billing_webhook_deliveries_failed_total",
      "core_billing_webhook_oldest_pending_age_seconds",
      "core_billing_mail_outbox_pending",
      "core_billing_mail_oldest_pending_age_seconds",
      "core_billing_usage_events_total",
      "core_worker_due_items",
      "core_worker_oldest_due_age_seconds",
      "core_metrics_source_up",
      "http_requests_total",
    ]) {
      expect(described, name).toContain(name);
    }
    for (const job of ["renewals", "payment_checks", "dunning_retries", "period_closes", "webhook_deliveries", "mail_outbox", "usage_retention", "idempotency_pruning"]) {
      expect(valueOf(samples, "core_worker_due_items", { job }), job).toBe(0);
      expect(valueOf(samples, "core_worker_oldest_due_age_seconds", { job }), job).toBe(0);
    }
    // the usage counters are there at 0 before the first event, so a rate over them (rejected / all) is defined from the start
    for (const result of ["accepted", "duplicate", "rejected"]) expect(valueOf(samples, "core_billing_usage_events_total", { result }), result).toBe(0);
    expect(valueOf(samples, "core_metrics_source_up", { source: "billing_worker" })).toBe(1);
    expect(valueOf(samples, "core_metrics_source_up", { source: "billing_outbox" })).toBe(1);
    // every job's pass series is there before its first pass (at 0), so "passes stopped" can alert on it
    for (const job of ["renewals", "tier_sync", "webhook_deliveries", "usage_retention"]) {
      expect(valueOf(samples, "core_worker_pass_duration_seconds_count", { job }), job).toBe(0);
    }
  });

  it("shows a webhook delivery pending, due and ageing until the dispatcher delivers it", async () => {
    const hooks = await receiver();
    try {
      const created = await b.call("POST", "/operator/webhook-endpoints", { headers: op, body: { url: hooks.url, events: ["invoice.paid"] } });
      expect(created.status).toBe(201);
      expect(await counted("core_billing_webhook_deliveries_pending")).toBe(0);
      await b.upgraded();
      const written = await scrape();
      expect(valueOf(written.samples, "core_billing_webhook_deliveries_pending")).toBe(1);
      expect(valueOf(written.samples, "core_worker_due_items", { job: "webhook_deliveries" })).toBe(1);
      b.clock.advance(90_000);
      const later = await scrape();
      expect(valueOf(later.samples, "core_billing_webhook_oldest_pending_age_seconds")).toBeGreaterThanOrEqual(90);
      expect(valueOf(later.samples, "core_worker_oldest_due_age_seconds", { job: "webhook_deliveries" })).toBeGreaterThanOrEqual(90);
      await b.ctx.webhooks.pass();
      const delivered = await scrape();
      expect(valueOf(delivered.samples, "core_billing_webhook_deliveries_pending")).toBe(0);
      expect(valueOf(delivered.samples, "core_billing_webhook_oldest_pending_age_seconds")).toBe(0);
      expect(valueOf(delivered.samples, "core_worker_due_items", { job: "webhook_deliveries" })).toBe(0);
      await b.call("DELETE", `/operator/webhook-endpoints/${created.body.id}`, { headers: op });
    } finally {
      await hooks.close();
    }
  });

  it("shows a mail pending, due and ageing in the mail outbox until it is sent, and one that failed waiting for its next try", async () => {
    await b.ctx.mail.drain();
    expect(await counted("core_billing_mail_outbox_pending")).toBe(0);
    await b.upgraded(); // its receipt
    const written = await scrape();
    expect(valueOf(written.samples, "core_billing_mail_outbox_pending")).toBe(1);
    expect(valueOf(written.samples, "core_worker_due_items", { job: "mail_outbox" })).toBe(1);
    b.clock.advance(90_000);
    const later = await scrape();
    expect(valueOf(later.samples, "core_billing_mail_oldest_pending_age_seconds")).toBeGreaterThanOrEqual(90);
    expect(valueOf(later.samples, "core_worker_oldest_due_age_seconds", { job: "mail_outbox" })).toBeGreaterThanOrEqual(90);
    b.mailer.mailFails = true;
    try {
      await b.ctx.mail.drain();
    } finally {
      b.mailer.mailFails = false;
    }
    // still pending, but not due until its backoff ends
    const failed = await scrape();
    expect(valueOf(failed.samples, "core_billing_mail_outbox_pending")).toBe(1);
    expect(valueOf(failed.samples, "core_worker_due_items", { job: "mail_outbox" })).toBe(0);
    b.clock.advance(60_000);
    await b.ctx.mail.drain();
    const sent = await scrape();
    expect(valueOf(sent.samples, "core_billing_mail_outbox_pending")).toBe(0);
    expect(valueOf(sent.samples, "core_billing_mail_oldest_pending_age_seconds")).toBe(0);
    expect(valueOf(sent.samples, "core_worker_due_items", { job: "mail_outbox" })).toBe(0);
  });

  it("counts a webhook delivery given up after three days of refusals, and it leaves the pending gauge", async () => {
    const hooks = await receiver(503);
    try {
      const created = await b.call("POST", "/operator/webhook-endpoints", { headers: op, body: { url: hooks.url, events: ["invoice.paid"] } });
      const failedBefore = await counted("core_billing_webhook_deliveries_failed_total");
      await b.upgraded();
      expect(await counted("core_billing_webhook_deliveries_pending")).toBe(1);
      // retried a minute, two, four … at most six hours apart, until three days have passed
      for (let pass = 0; pass < 40 && (await counted("core_billing_webhook_deliveries_pending")) > 0; pass++) {
        await b.ctx.webhooks.pass();
        b.clock.advance(6 * 3600_000);
      }
      expect(await counted("core_billing_webhook_deliveries_pending")).toBe(0);
      expect(await counted("core_billing_webhook_deliveries_failed_total")).toBe(failedBefore + 1);
      await b.call("DELETE", `/operator/webhook-endpoints/${created.body.id}`, { headers: op });
    } finally {
      await hooks.close();
    }
  });

  it("counts each payment's outcome by result: succeeded, declined, and unknown while it is in flight", async () => {
    const before = { succeeded: await counted("core_billing_collection_outcomes_total", { result: "succeeded" }), declined: await counted("core_billing_collection_outcomes_total", { result: "declined" }), unknown: await counted("core_billing_collection_outcomes_total", { result: "unknown" }) };
    await b.upgraded("plan_starter", "pm_card_visa");
    expect(await counted("core_billing_collection_outcomes_total", { result: "succeeded" })).toBe(before.succeeded + 1);

    const refused = await b.newPlatform();
    const declined = await b.call("POST", "/api/billing/upgrade", { headers: b.as.owner(refused), body: { planId: "plan_starter", paymentMethodId: "pm_card_chargeCustomerFail", billingEmail: "billing@example.com", idempotencyKey: crypto.randomUUID() } });
    expect(declined.status).toBe(402);
    expect(await counted("core_billing_collection_outcomes_total", { result: "declined" })).toBe(before.declined + 1);

    // the provider charges and its answer is lost: the payment is in flight until billing asks again
    const lost = await b.newPlatform();
    const pending = await b.call("POST", "/api/billing/upgrade", { headers: b.as.owner(lost), body: { planId: "plan_starter", paymentMethodId: "pm_card_core_answerLost", billingEmail: "billing@example.com", idempotencyKey: crypto.randomUUID() } });
    expect(pending.status).toBe(503);
    const inFlight = await scrape();
    expect(valueOf(inFlight.samples, "core_billing_collection_outcomes_total", { result: "unknown" })).toBe(before.unknown + 1);
    expect(valueOf(inFlight.samples, "core_billing_collections_pending")).toBe(1);
    // its check falls due after the charge's deadline and grace; the worker's check learns it succeeded
    b.clock.advance(10 * 60_000);
    const due = await scrape();
    expect(valueOf(due.samples, "core_worker_due_items", { job: "payment_checks" })).toBe(1);
    expect(valueOf(due.samples, "core_billing_collection_oldest_pending_age_seconds")).toBeGreaterThanOrEqual(600);
    await b.ctx.worker.pass();
    const settled = await scrape();
    expect(valueOf(settled.samples, "core_billing_collections_pending")).toBe(0);
    expect(valueOf(settled.samples, "core_worker_due_items", { job: "payment_checks" })).toBe(0);
    expect(valueOf(settled.samples, "core_billing_collection_outcomes_total", { result: "succeeded" })).toBe(before.succeeded + 2);
    // the pass was timed, each of its jobs on its own
    expect(valueOf(settled.samples, "core_worker_pass_duration_seconds_count", { job: "renewals" })).toBeGreaterThanOrEqual(1);
    expect(valueOf(settled.samples, "core_worker_pass_duration_seconds_count", { job: "webhook_deliveries" })).toBeGreaterThanOrEqual(1);
  });

  it("counts usage events accepted, duplicate and rejected by every ingestion request, read over real HTTP", async () => {
    const http = await b.overHttp();
    const scrapeHttp = async () => {
      const res = await fetch(`${http.url}/metrics`);
      expect(res.status).toBe(200);
      return parsePrometheus(await res.text());
    };
    const platformId = await b.newPlatform();
    const results = async () => {
      const { samples } = await scrapeHttp();
      return Object.fromEntries(["accepted", "duplicate", "rejected"].map((r) => [r, valueOf(samples, "core_billing_usage_events_total", { result: r }) ?? 0]));
    };
    const before = await results();
    const at = Math.floor(b.clock.now().getTime() / 1000) - 60;
    const event = { id: unique("evt"), platformId, meter: "api_requests", quantity: 1, timestamp: at };
    const first = await http.call("POST", "/usage/events", { headers: op, body: { events: [event, { ...event, id: unique("evt"), meter: "no_such_meter" }, { ...event, id: unique("evt"), quantity: 2 }] } });
    expect(first.body).toMatchObject({ accepted: 2, duplicates: 0, rejected: 1 });
    // the same path under the /api/billing prefix, a duplicate, an id reused with other content, a batch too old
    const again = await http.call("POST", "/api/billing/usage/events", { headers: op, body: { events: [event, { ...event, quantity: 5 }, { ...event, id: unique("evt"), timestamp: at - 40 * 86_400 }] } });
    expect(again.body).toMatchObject({ accepted: 0, duplicates: 1, rejected: 2 });
    expect(await results()).toEqual({ accepted: before.accepted! + 2, duplicate: before.duplicate! + 1, rejected: before.rejected! + 3 });
    // a batch refused whole (not a list of events) counts no event
    expect((await http.call("POST", "/usage/events", { headers: op, body: { events: "none" } })).status).toBe(400);
    expect(await results()).toEqual({ accepted: before.accepted! + 2, duplicate: before.duplicate! + 1, rejected: before.rejected! + 3 });
  });
});
