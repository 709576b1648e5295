import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabases } from "@core/storage";
import { startBilling, unique, type Answer, type Billing } from "./support/billing.js";

const cursorOf = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");
const decoded = (cursor: string) => JSON.parse(Buffer.from(cursor, "base64url").toString("utf8")) as { k: unknown; id: unknown };

function expectRefusal(answer: Answer, status: number, code?: string) {
  expect(answer.status, JSON.stringify(answer.body)).toBe(status);
  expect(answer.body.error).toEqual(expect.objectContaining({ code: code ?? expect.any(String), message: expect.any(String), requestId: expect.any(String) }));
}

/**
 * Operators find things (DESIGN §6.12): `GET /customers` and `GET /subscriptions`, filtered and paged
 * newest first with the kit's cursors, for operators and services only.
 */
describe.each(testDatabases())("operator lists on $name", (database) => {
  let b: Billing;
  let op: Record<string, string>;
  beforeAll(async () => {
    b = await startBilling(database);
    op = b.as.operator();
  });
  afterAll(() => b?.close());

  const tick = () => b.clock.advance(1_000);
  const newCustomer = async (email: string, metadata?: Record<string, string>) => {
    tick();
    const r = await b.call("POST", "/customers", { headers: op, body: { email, ...(metadata && { metadata }) } });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    return r.body as { id: string; email: string; createdAt: number };
  };
  const customers = async (query: string, headers = op) => b.call("GET", `/customers${query}`, { headers });
  const subscriptionsList = async (query: string, headers = op) => b.call("GET", `/subscriptions${query}`, { headers });
  /** every page of a listing, following its cursors to the end (null) */
  async function walk(path: string, query: string, limit: number) {
    const pages: any[][] = [];
    let cursor: string | null = null;
    do {
      const sep = query ? "&" : "?";
      const r: Answer = await b.call("GET", `${path}${query}${sep}limit=${limit}${cursor ? `&cursor=${cursor}` : ""}`, { headers: op });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      expect(r.body.data.length).toBeLessThanOrEqual(limit);
      pages.push(r.body.data);
      cursor = r.body.cursor;
      if (pages.length > 200) throw new Error("the cursor never ended");
    } while (cursor !== null);
    return pages;
  }

  describe("GET /customers", () => {
    let acmeOps: { id: string };
    let acmeBilling: { id: string };
    let acmeCorp: { id: string };
    let other: { id: string };
    let wild: { id: string };
    let xay: { id: string };
    beforeAll(async () => {
      acmeOps = await newCustomer("acme-ops@example.com");
      acmeBilling = await newCustomer("Billing@ACME.com");
      acmeCorp = await newCustomer("jane@acmecorp.io");
      other = await newCustomer("bob@example.org");
      wild = await newCustomer("x_yz@weird.example");
      xay = await newCustomer("xay@weird.example");
    });
    const idsOf = (r: Answer) => r.body.data.map((c: { id: string }) => c.id);

    it("answers items in the customer's one shape, newest first, with a null cursor on the last page", async () => {
      const r = await customers("?limit=100");
      expect(r.status).toBe(200);
      expect(r.body.cursor).toBeNull();
      const one = await b.call("GET", `/customers/${acmeBilling.id}`, { headers: op });
      expect(r.body.data).toContainEqual(one.body);
      const created = r.body.data.map((c: { createdAt: number }) => c.createdAt);
      expect(created).toEqual([...created].sort((x, y) => y - x));
      expect(idsOf(r).indexOf(xay.id)).toBeLessThan(idsOf(r).indexOf(acmeOps.id));
    });

    it('finds by email from the start of the address or of its domain, in any case: "acme" finds acme-ops@, @acme.com and @acmecorp.io', async () => {
      for (const q of ["acme", "ACME", "Acme"]) expect(idsOf(await customers(`?email=${q}`)), q).toEqual([acmeCorp.id, acmeBilling.id, acmeOps.id]);
      expect(idsOf(await customers("?email=billing%40acme"))).toEqual([acmeBilling.id]);
      expect(idsOf(await customers("?email=acme.com"))).toEqual([acmeBilling.id]);
      expect(idsOf(await customers("?email=BILLING%40ACME.COM"))).toEqual([acmeBilling.id]);
      expect(idsOf(await customers("?email=bob%40example.org"))).toEqual([other.id]);
      // inside a word is not a match: a prefix is what the index serves (DESIGN §6.12, customers.ts)
      expect(idsOf(await customers("?email=cme"))).toEqual([]);
      expect(idsOf(await customers("?email=nobody"))).toEqual([]);
    });

    it("takes % and _ in a search as themselves, not as wildcards", async () => {
      expect(idsOf(await customers(`?email=${encodeURIComponent("x_y")}`))).toEqual([wild.id]);
      expect(idsOf(await customers(`?email=${encodeURIComponent("x_yz")}`))).toEqual([wild.id]);
      expect(idsOf(await customers(`?email=${encodeURIComponent("x%z")}`))).toEqual([]);
      expect(idsOf(await customers(`?email=${encodeURIComponent("%")}`))).toEqual([]);
      expect(idsOf(await customers(`?email=${encodeURIComponent("_")}`))).toEqual([]);
    });

    it("finds a platform's customer, and combines filters with AND", async () => {
      const platformId = await b.newPlatform();
      const linked = await newCustomer("acme-linked@example.com", { platformId });
      expect(idsOf(await customers(`?platformId=${platformId}`))).toEqual([linked.id]);
      expect(idsOf(await customers(`?platformId=${platformId}&email=acme`))).toEqual([linked.id]);
      expect(idsOf(await customers(`?platformId=${platformId}&email=bob`))).toEqual([]);
      expect(idsOf(await customers("?platformId=plat_nobody"))).toEqual([]);
      expect(idsOf(await customers("?email=acme"))).toEqual([linked.id, acmeCorp.id, acmeBilling.id, acmeOps.id]);
    });

    it("pages to the end: every customer once, newest first, also across customers made at the same instant", async () => {
      // two made in one instant: the id breaks the tie, on whichever page each falls
      const same = await Promise.all([b.call("POST", "/customers", { headers: op, body: { email: "twin-a@example.com" } }), b.call("POST", "/customers", { headers: op, body: { email: "twin-b@example.com" } })]);
      expect(same.map((r) => r.status)).toEqual([201, 201]);
      for (let i = 0; i < 5; i++) await newCustomer(`page-${i}@example.com`);
      const all = (await customers("?limit=100")).body.data.map((c: { id: string }) => c.id);
      for (const limit of [1, 2, 3, 7]) {
        const pages = await walk("/customers", "", limit);
        expect(pages.flat().map((c) => c.id), `limit ${limit}`).toEqual(all);
        expect(pages.slice(0, -1).every((p) => p.length === limit)).toBe(true);
      }
      const filtered = await walk("/customers", "?email=page-", 2);
      expect(filtered.map((p) => p.length)).toEqual([2, 2, 1]);
      expect(filtered.flat().map((c) => c.email)).toEqual(["page-4@example.com", "page-3@example.com", "page-2@example.com", "page-1@example.com", "page-0@example.com"]);
    });

    it("takes limits 1 and 100, defaults to 25, and refuses 0, 101 and what is not an integer with 400", async () => {
      while ((await customers("?limit=100")).body.data.length < 27) await newCustomer(`${unique("fill")}@example.com`);
      const first = await customers("");
      expect(first.body.data).toHaveLength(25);
      expect(first.body.cursor).toEqual(expect.any(String));
      expect((await customers("?limit=1")).body.data).toHaveLength(1);
      expect((await customers("?limit=100")).status).toBe(200);
      for (const limit of ["0", "101", "-1", "abc", "2.5", ""]) expectRefusal(await customers(`?limit=${limit}`), 400);
    });

    it("refuses edited and foreign cursors with 400 in the error envelope", async () => {
      const page = await customers("?limit=1");
      const position = decoded(page.body.cursor);
      expect(position.id).toBe(page.body.data[0].id);
      // two free subscriptions, so that their listing has a second page
      for (let i = 0; i < 2; i++) expect((await b.call("GET", `/subscription?platformId=${await b.newPlatform()}`, { headers: op })).status).toBe(200);
      const subscriptionCursor = (await subscriptionsList("?limit=1&status=all")).body.cursor as string | null;
      for (const cursor of [
        "!!!",
        "bm90anNvbg",
        cursorOf({ k: position.k }),
        cursorOf({ k: "yesterday", id: position.id }),
        cursorOf({ k: "2026-02-30T10:00:00.000Z", id: position.id }),
        cursorOf({ k: 5, id: position.id }),
        cursorOf({ k: position.k, id: "cus_x'; drop table billing.customers; --" }),
        cursorOf([position.k, position.id]),
        // another listing's positions: a subscription's, an audit entry's
        cursorOf({ k: position.k, id: "sub_abc" }),
        cursorOf({ k: position.k, id: 12 }),
        ...(subscriptionCursor ? [subscriptionCursor] : []),
      ]) {
        expectRefusal(await customers(`?limit=1&cursor=${encodeURIComponent(cursor)}`), 400);
      }
      expect(subscriptionCursor).not.toBeNull();
      // the cursor as it was answered still works
      expect((await customers(`?limit=1&cursor=${page.body.cursor}`)).status).toBe(200);
    });

    it("refuses an empty or overlong email search and unknown platform id shapes with 400", async () => {
      expectRefusal(await customers("?email="), 400);
      expectRefusal(await customers(`?email=${"a".repeat(321)}`), 400);
      expect((await customers(`?email=${"a".repeat(320)}`)).status).toBe(200);
      expectRefusal(await customers("?platformId="), 400);
      expectRefusal(await customers(`?platformId=${"p".repeat(129)}`), 400);
    });

    it("is for operators and services: a tenant owner or member gets 403, nobody 401", async () => {
      const platformId = await b.newPlatform();
      expectRefusal(await customers("", b.as.owner(platformId)), 403, "FORBIDDEN");
      expectRefusal(await customers(`?platformId=${platformId}`, b.as.owner(platformId)), 403, "FORBIDDEN");
      expectRefusal(await customers("", b.as.member(platformId)), 403, "FORBIDDEN");
      expectRefusal(await customers("", {}), 401, "UNAUTHENTICATED");
      expect((await customers("?limit=1", await b.as.service())).status).toBe(200);
    });
  });

  describe("GET /subscriptions", () => {
    let paid: Awaited<ReturnType<Billing["upgraded"]>>;
    let late: Awaited<ReturnType<Billing["upgraded"]>>;
    let gone: Awaited<ReturnType<Billing["upgraded"]>>;
    let trialing: { id: string; platformId: string };
    let free: { id: string; platformId: string };
    let canceledId: string;
    const subscriptionOf = async (platformId: string) => (await b.call("GET", `/subscription?platformId=${platformId}`, { headers: op })).body;
    const idsOf = (r: Answer) => r.body.data.map((s: { id: string }) => s.id);
    beforeAll(async () => {
      tick();
      late = await b.upgraded("plan_starter");
      await b.call("POST", "/payment-methods/pm_card_chargeCustomerFail/attach", { headers: op, body: { customerId: late.subscription.customerId, setAsDefault: true } });
      tick();
      paid = await b.upgraded("plan_growth");
      tick();
      gone = await b.upgraded("plan_scale");
      tick();
      free = await subscriptionOf(await b.newPlatform());
      tick();
      const t = await subscriptionOf(await b.newPlatform());
      trialing = (await b.call("POST", `/operator/subscriptions/${t.id}/trial`, { headers: op, body: { trialDays: 60 } })).body;
      // the renewal of 28 February: the growth one is paid, the starter one refused (past due)
      b.clock.advance(Math.max(late.subscription.currentPeriodEnd * 1000 - b.clock.now().getTime(), 0) + 60_000);
      await b.ctx.worker.pass();
      tick();
      const canceled = await b.call("DELETE", `/subscriptions/${gone.subscription.id}?immediately=true`, { headers: op });
      expect(canceled.body.status).toBe("canceled");
      canceledId = canceled.body.id;
    });

    it("lists what has not ended by default, newest first, in the subscription's one shape", async () => {
      const r = await subscriptionsList("?limit=100");
      expect(r.status).toBe(200);
      expect(r.body.cursor).toBeNull();
      const statuses = new Set(r.body.data.map((s: { status: string }) => s.status));
      expect(statuses).toEqual(new Set(["active", "trialing", "past_due"]));
      expect(idsOf(r)).not.toContain(canceledId);
      expect(r.body.data).toContainEqual((await b.call("GET", `/subscriptions/${paid.subscription.id}`, { headers: op })).body);
      const created = r.body.data.map((s: { createdAt: number }) => s.createdAt);
      expect(created).toEqual([...created].sort((x, y) => y - x));
      // the scale platform's new free subscription is the newest of all
      expect(r.body.data[0]).toEqual(expect.objectContaining({ platformId: gone.platformId, tier: "free", status: "active" }));
    });

    it("filters by each status, all of them with status=all", async () => {
      expect(idsOf(await subscriptionsList("?status=past_due"))).toEqual([late.subscription.id]);
      expect(idsOf(await subscriptionsList("?status=trialing"))).toEqual([trialing.id]);
      expect(idsOf(await subscriptionsList("?status=canceled"))).toEqual([canceledId]);
      const active = (await subscriptionsList("?status=active&limit=100")).body.data;
      expect(active.every((s: { status: string }) => s.status === "active")).toBe(true);
      expect(active.map((s: { id: string }) => s.id)).toEqual(expect.arrayContaining([paid.subscription.id, free.id]));
      const all = await subscriptionsList("?status=all&limit=100");
      const notEnded = await subscriptionsList("?limit=100");
      expect(all.body.data).toHaveLength(notEnded.body.data.length + 1);
      expect(idsOf(all)).toContain(canceledId);
    });

    it("filters by tier and platform, and combines filters with AND", async () => {
      expect(idsOf(await subscriptionsList("?tier=growth"))).toEqual([paid.subscription.id]);
      expect(idsOf(await subscriptionsList("?tier=scale"))).toEqual([]);
      expect(idsOf(await subscriptionsList("?tier=scale&status=canceled"))).toEqual([canceledId]);
      // trialing on free is a trial of starter
      expect(idsOf(await subscriptionsList("?tier=starter")).sort()).toEqual([late.subscription.id, trialing.id].sort());
      expect(idsOf(await subscriptionsList("?tier=starter&status=trialing"))).toEqual([trialing.id]);
      expect(idsOf(await subscriptionsList("?tier=growth&status=past_due"))).toEqual([]);
      const current = await subscriptionOf(gone.platformId);
      expect(idsOf(await subscriptionsList(`?platformId=${gone.platformId}`))).toEqual([current.id]);
      expect(idsOf(await subscriptionsList(`?platformId=${gone.platformId}&status=all`))).toEqual([current.id, canceledId]);
      expect(idsOf(await subscriptionsList(`?platformId=${gone.platformId}&status=all&tier=free`))).toEqual([current.id]);
      expect(idsOf(await subscriptionsList(`?platformId=${free.platformId}&tier=free&status=active`))).toEqual([free.id]);
      expect(idsOf(await subscriptionsList("?platformId=plat_nobody&status=all"))).toEqual([]);
    });

    it("refuses an unknown status or tier, and an empty one, with 400 VALIDATION_ERROR", async () => {
      for (const query of ["?status=paused", "?status=ACTIVE", "?status=", "?tier=gold", "?tier=Free", "?tier=", "?status=active&tier=platinum"]) {
        expectRefusal(await subscriptionsList(query), 400, "VALIDATION_ERROR");
      }
    });

    it("pages to the end with every filter: each subscription once, newest first", async () => {
      for (const query of ["", "?status=all", "?tier=free", "?status=active&tier=free"]) {
        const all = (await subscriptionsList(`${query}${query ? "&" : "?"}limit=100`)).body.data.map((s: { id: string }) => s.id);
        expect(all.length, query).toBeGreaterThan(1);
        const pages = await walk("/subscriptions", query, 2);
        expect(pages.flat().map((s) => s.id), query).toEqual(all);
        expect(pages.at(-1)!.length).toBeGreaterThan(0);
      }
    });

    it("takes limits 1 and 100, defaults to 25, refuses 0 and 101; refuses edited and foreign cursors", async () => {
      while ((await subscriptionsList("?status=all&limit=100")).body.data.length < 27) await subscriptionOf(await b.newPlatform());
      expect((await subscriptionsList("?status=all")).body.data).toHaveLength(25);
      expect((await subscriptionsList("?limit=1")).body.data).toHaveLength(1);
      expect((await subscriptionsList("?limit=100")).status).toBe(200);
      for (const limit of ["0", "101", "abc"]) expectRefusal(await subscriptionsList(`?limit=${limit}`), 400);
      const page = await subscriptionsList("?limit=1");
      const position = decoded(page.body.cursor);
      const customerCursor = (await customers("?limit=1")).body.cursor as string;
      for (const cursor of [customerCursor, cursorOf({ k: position.k, id: "cus_abc" }), cursorOf({ k: "not a time", id: position.id }), cursorOf({ id: position.id }), "%%%"]) {
        expectRefusal(await subscriptionsList(`?limit=1&cursor=${encodeURIComponent(cursor)}`), 400);
      }
      expect((await subscriptionsList(`?limit=1&cursor=${page.body.cursor}`)).status).toBe(200);
    });

    it("is for operators and services: a tenant owner gets 403 even for its own platform, nobody 401", async () => {
      expectRefusal(await subscriptionsList(`?platformId=${paid.platformId}`, paid.owner), 403, "FORBIDDEN");
      expectRefusal(await subscriptionsList("", b.as.member(paid.platformId)), 403, "FORBIDDEN");
      expectRefusal(await subscriptionsList("", {}), 401, "UNAUTHENTICATED");
      expect(idsOf(await subscriptionsList(`?platformId=${paid.platformId}`, await b.as.service()))).toEqual([paid.subscription.id]);
    });
  });
});
