import { createHash, randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { TEST_CARDS } from "../../src/provider/local.js";

/**
 * A fake of the Stripe API, enough for billing's `stripe` provider and driven by the real SDK
 * (DESIGN §6.1): customers, PaymentMethods (Stripe's test tokens by name), SetupIntents,
 * PaymentIntents, Refunds and Billing Portal sessions, with Stripe's idempotency rules (a repeated key
 * replays the saved answer with `Idempotent-Replayed: true`, another body under the key is a 400
 * `idempotency_error`, a key still running is a 409) and faults on demand: no answer at all, a 500,
 * or a decline.
 */
export interface FakeStripe {
  url: string;
  secretKey: string;
  /** every request, in order: method, path, idempotency key, whether the answer was a replay */
  requests: { method: string; path: string; idempotencyKey: string | null; replayed: boolean; status: number }[];
  /** a customer as Stripe holds it */
  customer(id: string): { email: string | null; name: string | null; metadata: Record<string, string>; defaultPaymentMethod: string | null } | undefined;
  /** PaymentIntents that succeeded, by id: what actually moved money */
  succeededCharges(): { id: string; amount: number; customer: string; idempotencyKey: string | null; invoiceId: string | null }[];
  /**
   * The next request matching `path` (and `when`, given its form parameters) gets this fault instead
   * of its normal answer; `times` requests do (default 1; Infinity: every one, until `clearFaults`).
   */
  fault(path: RegExp, kind: Fault, options?: { times?: number; when?: (params: Record<string, string>) => boolean }): void;
  clearFaults(): void;
  /** Refunds as Stripe holds them: billing's (with its key and metadata) and those made outside it */
  refunds(): { id: string; amount: number; paymentIntent: string; charge: string; idempotencyKey: string | null; metadata: Record<string, string> }[];
  /**
   * A refund made at Stripe itself (its dashboard), outside billing: answers the Refund, and the
   * PaymentIntent's Charge as a `charge.refunded` event carries it (with its refunds listed or not).
   */
  refundOutside(paymentIntentId: string, amount: number): { refund: Record<string, unknown>; charge: (options?: { listRefunds?: boolean }) => Record<string, unknown> };
  /** The Charge of a PaymentIntent as Stripe's events carry it (a dispute's `charge`), with its refunds listed. */
  chargeOf(paymentIntentId: string): Record<string, unknown>;
  /** runs when a PaymentIntent was made, before its answer is sent (null: none): Stripe's event may come first */
  onPaymentIntent(hook: ((intent: Record<string, unknown>) => Promise<void>) | null): void;
  close(): Promise<void>;
}

/**
 * How Stripe misbehaves (DESIGN §6.9 proof). `silent`: the request is carried out and its answer
 * saved, but the client never hears it (a timeout after the work). `drop`: carried out and saved, then
 * the connection is reset. `error500`: a 500 before any work (nothing saved: a retry runs it).
 * `error500After`: carried out, and the answer is a 500, saved for the key as Stripe saves every answer
 * of a request that began executing, so a retry hears the 500 again. `hang`: no work and no answer.
 * `decline`: a PaymentIntent declined with card_declined / generic_decline.
 */
export type Fault = "silent" | "drop" | "error500" | "error500After" | "hang" | "decline";

type Params = Record<string, string>;
interface Answer {
  status: number;
  body: unknown;
}

interface Card {
  id: string;
  customer: string | null;
  /** was attached once: a detached card is never attached again */
  used: boolean;
  brand: string;
  last4: string;
  funding: string;
  failsCharges: boolean;
  created: number;
}

const id = (prefix: string) => `${prefix}_${randomBytes(12).toString("base64url").replace(/[-_]/g, "x")}`;
const error = (status: number, type: string, message: string, extra: Record<string, unknown> = {}): Answer => ({ status, body: { error: { type, message, ...extra } } });
const missing = (what: string, value: string, param: string) => error(404, "invalid_request_error", `No such ${what}: '${value}'`, { code: "resource_missing", param });

/** `now`: Stripe's clock, in milliseconds (a test's clock, to keep creation times beside billing's). */
export async function startFakeStripe(options: { now?: () => number } = {}): Promise<FakeStripe> {
  const secretKey = `sk_test_${randomBytes(16).toString("hex")}`;
  const customers = new Map<string, { id: string; email: string | null; name: string | null; metadata: Params; defaultPaymentMethod: string | null }>();
  const cards = new Map<string, Card>();
  const intents = new Map<
    string,
    { id: string; amount: number; currency: string; customer: string; status: string; latestCharge: string; idempotencyKey: string | null; metadata: Params; created: number; declineCode: string | null }
  >();
  const refunds = new Map<
    string,
    { id: string; amount: number; currency: string; paymentIntent: string; charge: string; status: string; idempotencyKey: string | null; metadata: Params; created: number }
  >();
  const saved = new Map<string, { hash: string; answer: Answer }>();
  const running = new Set<string>();
  const faults: { path: RegExp; kind: Fault; times: number; when?: (params: Params) => boolean }[] = [];
  let created: ((intent: Record<string, unknown>) => Promise<void>) | null = null;
  const requests: FakeStripe["requests"] = [];
  const now = () => Math.floor((options.now ?? Date.now)() / 1000);

  const cardJson = (card: Card) => ({
    id: card.id,
    object: "payment_method",
    type: "card",
    customer: card.customer,
    created: card.created,
    card: { brand: card.brand, last4: card.last4, exp_month: 12, exp_year: 2034, funding: card.funding },
  });
  const customerJson = (c: typeof customers extends Map<string, infer V> ? V : never) => ({
    id: c.id,
    object: "customer",
    email: c.email,
    name: c.name,
    metadata: c.metadata,
    invoice_settings: { default_payment_method: c.defaultPaymentMethod },
  });
  const intentJson = (i: typeof intents extends Map<string, infer V> ? V : never) => ({
    id: i.id,
    object: "payment_intent",
    status: i.status,
    latest_charge: i.latestCharge,
    amount: i.amount,
    amount_received: i.status === "succeeded" ? i.amount : 0,
    currency: i.currency,
    customer: i.customer,
    created: i.created,
    metadata: i.metadata,
    last_payment_error: i.declineCode ? { type: "card_error", code: "card_declined", decline_code: i.declineCode, message: "Your card was declined." } : null,
  });
  const refundJson = (r: typeof refunds extends Map<string, infer V> ? V : never) => ({
    id: r.id,
    object: "refund",
    amount: r.amount,
    currency: r.currency,
    charge: r.charge,
    payment_intent: r.paymentIntent,
    status: r.status,
    metadata: r.metadata,
    created: r.created,
  });
  const refundedOf = (intentId: string) => [...refunds.values()].filter((r) => r.paymentIntent === intentId && r.status === "succeeded").reduce((sum, r) => sum + r.amount, 0);
  const chargeJson = (i: typeof intents extends Map<string, infer V> ? V : never, listRefunds = true) => ({
    id: i.latestCharge,
    object: "charge",
    amount: i.amount,
    amount_refunded: refundedOf(i.id),
    currency: i.currency,
    customer: i.customer,
    payment_intent: i.id,
    refunded: refundedOf(i.id) >= i.amount,
    status: "succeeded",
    ...(listRefunds && {
      refunds: { object: "list", data: [...refunds.values()].filter((r) => r.paymentIntent === i.id).reverse().map(refundJson), has_more: false, url: `/v1/charges/${i.latestCharge}/refunds` },
    }),
  });
  /** A refund of a PaymentIntent, as Stripe makes it: never more than is left of the payment. */
  const makeRefund = (intentId: string, amount: number | undefined, metadata: Params, key: string | null): Answer => {
    const intent = intents.get(intentId);
    if (!intent) return missing("payment_intent", intentId, "payment_intent");
    if (intent.status !== "succeeded") return error(400, "invalid_request_error", "This PaymentIntent does not have a successful charge to refund.", { code: "charge_not_refundable" });
    const left = intent.amount - refundedOf(intent.id);
    if (left <= 0) return error(400, "invalid_request_error", `Charge ${intent.latestCharge} has already been refunded.`, { code: "charge_already_refunded" });
    const want = amount ?? left;
    if (!(want > 0) || want > left) return error(400, "invalid_request_error", `Refund amount (${want}) is greater than unrefunded amount on charge (${left})`, { code: "amount_too_large", param: "amount" });
    const refund = { id: id("re"), amount: want, currency: intent.currency, paymentIntent: intent.id, charge: intent.latestCharge, status: "succeeded", idempotencyKey: key, metadata, created: now() };
    refunds.set(refund.id, refund);
    return { status: 200, body: refundJson(refund) };
  };
  const metadataOf = (params: Params) => Object.fromEntries(Object.entries(params).flatMap(([k, v]) => (k.startsWith("metadata[") ? [[k.slice(9, -1), v]] : [])));

  /** One API call; `declineNext` is a fault asking this PaymentIntent to be declined. */
  function handle(method: string, path: string, params: Params, key: string | null, declineNext: boolean): Answer {
    let m: RegExpMatchArray | null;
    if (method === "POST" && path === "/v1/customers") {
      const customer = { id: id("cus"), email: params.email ?? null, name: params.name ?? null, metadata: metadataOf(params), defaultPaymentMethod: null };
      customers.set(customer.id, customer);
      return { status: 200, body: customerJson(customer) };
    }
    if ((m = path.match(/^\/v1\/customers\/([^/]+)$/))) {
      const customer = customers.get(m[1]!);
      if (!customer) return missing("customer", m[1]!, "id");
      if (method === "POST") {
        if (params.email !== undefined) customer.email = params.email;
        if (params.name !== undefined) customer.name = params.name;
        const pm = params["invoice_settings[default_payment_method]"];
        if (pm !== undefined) {
          if (cards.get(pm)?.customer !== customer.id) return error(400, "invalid_request_error", `No such PaymentMethod: '${pm}'`, { param: "invoice_settings[default_payment_method]" });
          customer.defaultPaymentMethod = pm;
        }
      }
      return { status: 200, body: customerJson(customer) };
    }
    if (method === "GET" && (m = path.match(/^\/v1\/customers\/([^/]+)\/payment_methods$/))) {
      if (!customers.has(m[1]!)) return missing("customer", m[1]!, "customer");
      // newest first, as Stripe lists
      const data = [...cards.values()].filter((c) => c.customer === m![1]).reverse().map(cardJson);
      return { status: 200, body: { object: "list", data, has_more: false, url: path } };
    }
    if ((m = path.match(/^\/v1\/payment_methods\/([^/]+)\/attach$/)) && method === "POST") {
      const token = m[1]!;
      const customer = params.customer;
      if (!customer || !customers.has(customer)) return missing("customer", customer ?? "", "customer");
      const test = Object.hasOwn(TEST_CARDS, token) ? TEST_CARDS[token]! : undefined;
      if (test) {
        if (test.refused) return error(402, "card_error", "Your card was declined.", { code: test.refused.code, decline_code: test.refused.declineCode ?? undefined });
        const card: Card = { id: id("pm"), customer, used: true, brand: test.brand, last4: test.last4, funding: test.funding, failsCharges: test.failsCharges ?? false, created: now() };
        cards.set(card.id, card);
        return { status: 200, body: cardJson(card) };
      }
      const card = cards.get(token);
      if (!card) return missing("PaymentMethod", token, "payment_method");
      if (card.customer === customer) return { status: 200, body: cardJson(card) };
      if (card.customer) return error(400, "invalid_request_error", "The payment method you provided has already been attached to a customer.");
      return error(400, "invalid_request_error", "This PaymentMethod was previously used without being attached to a Customer or was detached from a Customer, and may not be used again.");
    }
    if ((m = path.match(/^\/v1\/payment_methods\/([^/]+)\/detach$/)) && method === "POST") {
      const card = cards.get(m[1]!);
      if (!card) return missing("PaymentMethod", m[1]!, "payment_method");
      if (!card.customer) return error(400, "invalid_request_error", "The payment method you provided is not attached to a customer so detachment is impossible.");
      card.customer = null;
      return { status: 200, body: cardJson(card) };
    }
    if ((m = path.match(/^\/v1\/payment_methods\/([^/]+)$/)) && method === "GET") {
      const card = cards.get(m[1]!);
      return card ? { status: 200, body: cardJson(card) } : missing("PaymentMethod", m[1]!, "id");
    }
    if (method === "POST" && path === "/v1/setup_intents") {
      if (!customers.has(params.customer ?? "")) return missing("customer", params.customer ?? "", "customer");
      const intent = id("seti");
      return { status: 200, body: { id: intent, object: "setup_intent", client_secret: `${intent}_secret_${randomBytes(12).toString("hex")}`, status: "requires_payment_method", customer: params.customer } };
    }
    if (method === "POST" && path === "/v1/billing_portal/sessions") {
      if (!customers.has(params.customer ?? "")) return missing("customer", params.customer ?? "", "customer");
      const session = id("bps");
      return { status: 200, body: { id: session, object: "billing_portal.session", customer: params.customer, return_url: params.return_url, url: `${base}/p/session/${session}` } };
    }
    if (method === "POST" && path === "/v1/payment_intents") {
      const customer = params.customer ?? "";
      const pm = params.payment_method ?? "";
      if (!customers.has(customer)) return missing("customer", customer, "customer");
      const card = cards.get(pm);
      if (!card) return missing("PaymentMethod", pm, "payment_method");
      if (card.customer !== customer) return error(400, "invalid_request_error", "The provided PaymentMethod does not belong to this Customer.", { param: "payment_method" });
      const intent = {
        id: id("pi"),
        amount: Number(params.amount),
        currency: params.currency ?? "usd",
        customer,
        status: "succeeded",
        latestCharge: id("ch"),
        idempotencyKey: key,
        metadata: metadataOf(params),
        created: now(),
        declineCode: null as string | null,
      };
      if (card.failsCharges || declineNext) {
        intent.status = "requires_payment_method";
        intent.declineCode = "generic_decline";
        intents.set(intent.id, intent);
        return error(402, "card_error", "Your card was declined.", { code: "card_declined", decline_code: "generic_decline", payment_intent: intentJson(intent) });
      }
      intents.set(intent.id, intent);
      return { status: 200, body: { ...intentJson(intent), payment_method: pm } };
    }
    if (method === "GET" && path === "/v1/payment_intents") {
      // newest first, filtered as Stripe filters: by customer and by creation time
      const gte = params["created[gte]"] === undefined ? -Infinity : Number(params["created[gte]"]);
      const lte = params["created[lte]"] === undefined ? Infinity : Number(params["created[lte]"]);
      const data = [...intents.values()]
        .filter((i) => (params.customer === undefined || i.customer === params.customer) && i.created >= gte && i.created <= lte)
        .reverse()
        .map(intentJson);
      return { status: 200, body: { object: "list", data, has_more: false, url: path } };
    }
    if (method === "POST" && path === "/v1/refunds") {
      return makeRefund(params.payment_intent ?? "", params.amount === undefined ? undefined : Number(params.amount), metadataOf(params), key);
    }
    if (method === "GET" && path === "/v1/refunds") {
      // newest first, by PaymentIntent or by Charge
      const data = [...refunds.values()]
        .filter((r) => (params.payment_intent === undefined || r.paymentIntent === params.payment_intent) && (params.charge === undefined || r.charge === params.charge))
        .reverse()
        .map(refundJson);
      return { status: 200, body: { object: "list", data, has_more: false, url: path } };
    }
    return error(404, "invalid_request_error", `Unrecognized request URL (${method}: ${path}).`);
  }

  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const url = new URL(req.url ?? "/", "http://fake");
      const method = req.method ?? "GET";
      const body = Buffer.concat(chunks).toString("utf8");
      const params = Object.fromEntries(new URLSearchParams(method === "GET" ? url.search : body));
      const key = (req.headers["idempotency-key"] as string | undefined) ?? null;
      let fault: Fault | null = null;
      const send = (answer: Answer, replayed = false) => {
        if (fault === "silent" || fault === "hang") {
          // the work (or the replay) is done, or nothing is, and the client never hears of it
          requests.push({ method, path: url.pathname, idempotencyKey: key, replayed, status: 0 });
          return;
        }
        if (fault === "drop") {
          requests.push({ method, path: url.pathname, idempotencyKey: key, replayed, status: 0 });
          req.socket.destroy();
          return;
        }
        requests.push({ method, path: url.pathname, idempotencyKey: key, replayed, status: answer.status });
        res.writeHead(answer.status, { "content-type": "application/json", "request-id": id("req"), ...(replayed && { "idempotent-replayed": "true" }) });
        res.end(JSON.stringify(answer.body));
      };
      if (req.headers.authorization !== `Bearer ${secretKey}`) return send(error(401, "invalid_request_error", "Invalid API Key provided"));

      const at = faults.findIndex((f) => f.path.test(url.pathname) && (!f.when || f.when(params)));
      if (at >= 0) {
        fault = faults[at]!.kind;
        if (--faults[at]!.times <= 0) faults.splice(at, 1);
      }
      if (fault === "error500") return send(error(500, "api_error", "Something went wrong on Stripe's end."));
      if (fault === "hang") return send(error(500, "api_error", "never sent"));

      // Stripe's idempotency: keys per account, on POST; the saved answer of a key is replayed
      const hash = createHash("sha256").update(`${url.pathname}\n${body}`).digest("hex");
      if (method === "POST" && key) {
        const earlier = saved.get(key);
        if (earlier) {
          if (earlier.hash !== hash) return send(error(400, "idempotency_error", "Keys for idempotent requests can only be used with the same parameters they were first used with."));
          return send(earlier.answer, true);
        }
        if (running.has(key)) return send(error(409, "idempotency_error", "There is currently another in-progress request using this Idempotency Key."));
        running.add(key);
      }
      // a little latency, so concurrent requests with one key really overlap
      setTimeout(async () => {
        const done = handle(method, url.pathname, params, key, fault === "decline");
        // the work is done; the answer is Stripe's own failure
        const answer = fault === "error500After" ? error(500, "api_error", "Something went wrong on Stripe's end.") : done;
        if (method === "POST" && key) {
          running.delete(key);
          // as at Stripe: a request that began executing keeps its result, errors included
          saved.set(key, { hash, answer });
        }
        const made = method === "POST" && url.pathname === "/v1/payment_intents" ? [...intents.values()].find((i) => i.idempotencyKey === key && key !== null) : undefined;
        if (made && created) await created(intentJson(made)).catch(() => undefined);
        send(answer);
      }, 5);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url: base,
    secretKey,
    requests,
    customer: (customerId) => customers.get(customerId),
    succeededCharges: () =>
      [...intents.values()]
        .filter((i) => i.status === "succeeded")
        .map((i) => ({ id: i.id, amount: i.amount, customer: i.customer, idempotencyKey: i.idempotencyKey, invoiceId: i.metadata.core_invoice_id ?? null })),
    refunds: () =>
      [...refunds.values()].map((r) => ({ id: r.id, amount: r.amount, paymentIntent: r.paymentIntent, charge: r.charge, idempotencyKey: r.idempotencyKey, metadata: r.metadata })),
    refundOutside: (paymentIntentId, amount) => {
      const answer = makeRefund(paymentIntentId, amount, {}, null);
      if (answer.status !== 200) throw new Error(`the fake refused the refund: ${JSON.stringify(answer.body)}`);
      return { refund: answer.body as Record<string, unknown>, charge: (options = {}) => chargeJson(intents.get(paymentIntentId)!, options.listRefunds ?? true) };
    },
    chargeOf: (paymentIntentId) => chargeJson(intents.get(paymentIntentId)!),
    fault: (path, kind, options = {}) => faults.push({ path, kind, times: options.times ?? 1, when: options.when }),
    clearFaults: () => faults.splice(0, faults.length),
    onPaymentIntent: (hook) => {
      created = hook;
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
