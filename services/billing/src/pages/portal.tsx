import type { Context } from "hono";
import { html } from "hono/html";
import type { Child } from "hono/jsx";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { previewJson } from "../changes.js";
import { formatMoney, formatQuantity } from "../money.js";
import type { Plan } from "../plans.js";
import type { PaymentMethodView } from "../provider/types.js";
import type { subscriptionJson } from "../subscriptions.js";
import type { currentUsage } from "../usage.js";
import { BILLING_STYLESHEET_PATH, PAGE_HEADERS } from "./invoice.js";
import { UsageChart } from "./usage-chart.js";

type Subscription = ReturnType<typeof subscriptionJson>;
type Preview = ReturnType<typeof previewJson>;
type Usage = Awaited<ReturnType<typeof currentUsage>>;

export interface PortalInvoice {
  id: string;
  number: string | null;
  status: string;
  totalCents: number;
  amountPaidCents: number;
  amountDueCents: number;
  periodStart: number;
  periodEnd: number;
  /** when it was finalized (Unix seconds) */
  createdAt: number;
  /** a payment of it is in flight (DESIGN §6.9): no "Pay now" meanwhile */
  paying: boolean;
}

/** What the next renewal charges (`GET /invoices/upcoming`), or null when nothing will be. */
export interface PortalUpcoming {
  amountDueCents: number;
  taxCents: number;
  nextChargeAt: number;
}

/** An invoice a person can pay from the page, and why it is owed. */
interface OwedInvoice {
  id: string;
  number: string | null;
  amountDueCents: number;
  /** the provider's refusal, in its words */
  reason: string;
  paying: boolean;
}

/** Everything the portal's main page shows (DESIGN §6.1). */
export interface PortalView {
  base: string;
  returnUrl: string;
  email: string;
  currency: string;
  /** billing time (Unix seconds) */
  now: number;
  subscription: Subscription;
  plan: Plan;
  plans: Plan[];
  usage: Usage;
  /** each meter's usage per UTC day of the period so far, from the rollups */
  daily: { first: string; last: string; days: { date: string; meter: string; quantity: string }[] };
  invoices: PortalInvoice[];
  upcoming: PortalUpcoming | null;
  cards: (PaymentMethodView & { isDefault: boolean })[];
  /** the default card as "visa •••• 4242", or null */
  defaultCard: string | null;
  /** the default card's last charge was refused */
  failingCard: { card: string; reason: string; invoiceNumber: string | null } | null;
  /** past due: the refused invoice, the reason and the next retry */
  refused: (OwedInvoice & { attempts: number; nextAttemptAt: number | null }) | null;
  /** on free: the paid plan that ended last, and the invoice dunning could not collect, if still owed */
  ended: { planName: string; endedAt: number; canceledByCustomer: boolean; unpaid: OwedInvoice | null } | null;
  /** the test cards a person can add (local provider), or null */
  testCards: { token: string; label: string }[] | null;
}

export type Alert = { kind: "success" | "error" | "info" | "warning"; text: string } | null;

/** A UTC day (`2026-11-27`); every date on billing's pages is UTC, and says so where it matters. */
const day = (seconds: number | null) => (seconds === null ? "—" : new Date(seconds * 1000).toISOString().slice(0, 10));
/** A UTC time to the minute (`2026-11-28 10:00 UTC`). */
const moment = (seconds: number) => `${new Date(seconds * 1000).toISOString().slice(0, 16).replace("T", " ")} UTC`;

const meterName = (meter: string) => meter.replaceAll("_", " ");

/** What the status says, in words: a pending cancellation is "Cancels on <date>", never "Active". */
function statusText(s: Subscription): string {
  if (s.status === "canceled") return "Canceled";
  if (s.cancelAtPeriodEnd) return `Cancels on ${day(s.currentPeriodEnd)}`;
  if (s.status === "trialing") return `Trial until ${day(s.trialEnd ?? s.currentPeriodEnd)}`;
  if (s.status === "past_due") return "Payment failed: retrying";
  return "Active";
}

const INVOICE_STATUS: Record<string, string> = { open: "Open", paid: "Paid", void: "Void", uncollectible: "Uncollectible" };

function Layout(props: { title: string; returnUrl: string | null; wide?: boolean; children: Child }) {
  return (
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>{`${props.title} · Core billing`}</title>
        <link rel="stylesheet" href={BILLING_STYLESHEET_PATH} />
      </head>
      <body>
        <main class={props.wide ? "wide" : undefined}>
          {props.returnUrl ? (
            <p>
              <a href={props.returnUrl}>← Back</a>
            </p>
          ) : null}
          <h1>{props.title}</h1>
          {props.children}
        </main>
      </body>
    </html>
  );
}

function AlertBox(props: { alert: Alert }) {
  if (!props.alert) return null;
  return (
    <div class={`alert ${props.alert.kind}`} role={props.alert.kind === "error" ? "alert" : "status"}>
      {props.alert.text}
    </div>
  );
}

/** What the subscription will charge next, in words: the upcoming invoice's amount, tax and usage so far included (DESIGN §6.9). */
function nextCharge(v: PortalView): string {
  const s = v.subscription;
  const money = (cents: number) => formatMoney(cents, v.currency);
  if (s.cancelAtPeriodEnd) return `Nothing: the plan ends on ${day(s.currentPeriodEnd)}, then the platform is on Free`;
  if (!v.upcoming) return "Nothing: the free plan costs nothing";
  const tier = s.pendingTier ?? s.tier;
  const plan = v.plans.find((p) => p.tier === tier) ?? v.plan;
  const tax = v.upcoming.taxCents > 0 ? `, ${money(v.upcoming.taxCents)} tax included` : "";
  return `${money(v.upcoming.amountDueCents)} on ${day(v.upcoming.nextChargeAt)}${tax}${tier !== s.tier ? ` (${plan.name}, from then on)` : ""}`;
}

/**
 * "Pay now" for an open or uncollectible invoice: the form's key makes a double submit charge once;
 * with more than one card the person picks the card (the default first).
 */
function PayForm(props: { v: PortalView; invoice: { id: string; number: string | null; amountDueCents: number }; label: string }) {
  const v = props.v;
  const cards = [...v.cards].sort((a, b) => Number(b.isDefault) - Number(a.isDefault));
  return (
    <form method="post" action={`${v.base}/invoices/${props.invoice.id}/pay`} class="pay">
      <input type="hidden" name="key" value={crypto.randomUUID()} />
      {cards.length > 1 ? (
        <span class="field inline">
          <label for={`pay-card-${props.invoice.id}`}>Pay with</label>
          <select id={`pay-card-${props.invoice.id}`} name="paymentMethodId">
            {cards.map((card) => (
              <option value={card.id}>
                {card.card.brand} •••• {card.card.last4}
                {card.isDefault ? " (default)" : ""}
              </option>
            ))}
          </select>
        </span>
      ) : null}
      <button type="submit">{props.label}</button>
    </form>
  );
}

/** What the page has to tell before anything else: a plan dunning ended, a refused payment, a failing card, a trial, a cancellation. */
function States(props: { v: PortalView }) {
  const v = props.v;
  const s = v.subscription;
  const money = (cents: number) => formatMoney(cents, v.currency);
  const invoiceName = (i: { id: string; number: string | null }) => i.number ?? i.id;
  return (
    <>
      {v.ended?.unpaid ? (
        <section class="alert error" aria-labelledby="ended">
          <h2 id="ended">Your {v.ended.planName} plan ended</h2>
          <p>
            It ended on {day(v.ended.endedAt)} because invoice {invoiceName(v.ended.unpaid)} ({money(v.ended.unpaid.amountDueCents)}) could not be collected: {v.ended.unpaid.reason}{" "}
            The platform is on Free now.
          </p>
          <p>Paying the invoice settles what is owed. It does not bring the plan back: choose a plan below to subscribe again.</p>
          {v.ended.unpaid.paying ? <p>A payment of it is being confirmed.</p> : <PayForm v={v} invoice={v.ended.unpaid} label={`Pay ${money(v.ended.unpaid.amountDueCents)} now`} />}
        </section>
      ) : null}
      {v.ended && !v.ended.unpaid && s.tier === "free" ? (
        <p class="alert info">
          Your {v.ended.planName} plan ended on {day(v.ended.endedAt)}
          {v.ended.canceledByCustomer ? ", as it was canceled" : ""}. The platform is on Free.
        </p>
      ) : null}
      {v.refused ? (
        <section class="alert error" aria-labelledby="refused">
          <h2 id="refused">Your payment failed</h2>
          <p>
            Invoice {invoiceName(v.refused)} ({money(v.refused.amountDueCents)}) could not be charged: {v.refused.reason}{" "}
            {v.refused.paying ? null : v.refused.nextAttemptAt !== null ? `We try again on ${moment(v.refused.nextAttemptAt)}. A new default card is tried at once.` : "It is not tried again by itself: pay it below, or make another card the default."}
          </p>
          {v.refused.paying ? <p>A payment of it is being confirmed.</p> : <PayForm v={v} invoice={v.refused} label={`Pay ${money(v.refused.amountDueCents)} now`} />}
        </section>
      ) : null}
      {v.failingCard ? (
        <p class="alert warning" role="status">
          Your default card, {v.failingCard.card}, was declined the last time it was charged: {v.failingCard.reason} <a href="#cards">Add another card or make another one the default</a>.
        </p>
      ) : null}
      {s.status === "trialing" && !s.cancelAtPeriodEnd ? (
        <p class="alert info">
          Your trial of {v.plan.name} ends on {day(s.trialEnd ?? s.currentPeriodEnd)}.{" "}
          {v.upcoming
            ? v.defaultCard
              ? `Then ${money(v.upcoming.amountDueCents)} is charged to ${v.defaultCard} for the first month.`
              : `Then ${money(v.upcoming.amountDueCents)} is charged for the first month: add a card before then, or the platform returns to Free.`
            : null}
        </p>
      ) : null}
      {s.cancelAtPeriodEnd && s.tier !== "free" ? (
        <p class="alert info">
          Your {v.plan.name} plan is canceled: it stays until {moment(s.currentPeriodEnd)}, then the platform is on Free. Nothing more is charged. Resume to keep it.
        </p>
      ) : null}
    </>
  );
}

function PortalPage(props: { view: PortalView; alert: Alert }) {
  const v = props.view;
  const s = v.subscription;
  const money = (cents: number) => formatMoney(cents, v.currency);
  const paid = s.tier !== "free";
  const pendingPlan = s.pendingTier ? v.plans.find((p) => p.tier === s.pendingTier) : undefined;
  const featured = new Set([v.refused?.id, v.ended?.unpaid?.id].filter(Boolean));
  return (
    <Layout title="Billing" returnUrl={v.returnUrl} wide>
      <AlertBox alert={props.alert} />
      <States v={v} />
      <section class="card" aria-labelledby="plan">
        <h2 id="plan">Your plan</h2>
        <dl class="facts">
          <dt>Plan</dt>
          <dd>
            {s.quantity === 1 ? v.plan.name : `${s.quantity} × ${v.plan.name}`} · {money(v.plan.priceCents * s.quantity)} a month
          </dd>
          <dt>Status</dt>
          <dd>{statusText(s)}</dd>
          <dt>Period (UTC)</dt>
          <dd>
            {day(s.currentPeriodStart)} to {day(s.currentPeriodEnd)}
          </dd>
          {s.trialEnd && s.status === "trialing" ? (
            <>
              <dt>Trial ends</dt>
              <dd>{moment(s.trialEnd)}</dd>
            </>
          ) : null}
          {pendingPlan && !s.cancelAtPeriodEnd ? (
            <>
              <dt>Scheduled change</dt>
              <dd>
                {pendingPlan.name} from {day(s.currentPeriodEnd)}
              </dd>
            </>
          ) : null}
          {s.pendingQuantity !== null && s.pendingQuantity !== s.quantity && !s.cancelAtPeriodEnd ? (
            <>
              <dt>Seats</dt>
              <dd>
                {s.quantity}, then {s.pendingQuantity} from {day(s.currentPeriodEnd)}
              </dd>
            </>
          ) : null}
          <dt>Next charge</dt>
          <dd>{nextCharge(v)}</dd>
          <dt>Billing email</dt>
          <dd>{v.email}</dd>
        </dl>
        <p>
          <a href={`${v.base}/details`}>Billing details</a> <span class="muted">(name, address and tax id printed on your invoices)</span>
        </p>
        {paid && !s.cancelAtPeriodEnd ? (
          <form method="post" action={`${v.base}/cancel`}>
            <button type="submit" class="danger">
              Cancel at the end of the period
            </button>
          </form>
        ) : null}
        {paid && s.cancelAtPeriodEnd ? (
          <form method="post" action={`${v.base}/resume`}>
            <button type="submit">Resume my plan</button>
          </form>
        ) : null}
      </section>

      <section class="card" aria-labelledby="change">
        <h2 id="change">{paid ? "Change plan" : "Choose a plan"}</h2>
        <ul class="items">
          {v.plans.map((plan) => (
            <li>
              <span>
                <strong>{plan.name}</strong> · {money(plan.priceCents)} a month
                {plan.tier === s.tier ? <span class="badge"> Current</span> : null}
                {plan.tier === s.pendingTier ? <span class="badge"> From {day(s.currentPeriodEnd)}</span> : null}
              </span>
              {plan.tier === s.tier && !s.pendingTier ? null : (
                <a href={`${v.base}/change?tier=${plan.tier}`}>{plan.tier === s.tier ? `Stay on ${plan.name}` : `Preview ${plan.name}`}</a>
              )}
            </li>
          ))}
        </ul>
      </section>

      <section class="card" aria-labelledby="usage">
        <h2 id="usage">Usage this period</h2>
        <table>
          <thead>
            <tr>
              <th scope="col">Meter</th>
              <th scope="col" class="amount">
                Used
              </th>
              <th scope="col" class="amount">
                Included
              </th>
            </tr>
          </thead>
          <tbody>
            {v.usage.meters.map((m) => (
              <tr>
                <td>{meterName(m.meter)}</td>
                <td class="amount">{formatQuantity(m.quantity)}</td>
                <td class="amount">{formatQuantity(m.included)}</td>
              </tr>
            ))}
          </tbody>
        </table>
        {v.usage.estimatedOverageCents > 0 ? <p>Usage beyond the plan so far: {money(v.usage.estimatedOverageCents)}, invoiced after the period.</p> : null}
        {v.usage.meters.map((m) => (
          <UsageChart meter={m.meter} included={m.included} first={v.daily.first} last={v.daily.last} days={v.daily.days.filter((d) => d.meter === m.meter)} />
        ))}
      </section>

      <section class="card" aria-labelledby="cards">
        <h2 id="cards">Payment methods</h2>
        {v.cards.length === 0 ? <p class="muted">No card yet.</p> : null}
        <ul class="items">
          {v.cards.map((card) => (
            <li>
              <span>
                {card.card.brand} •••• {card.card.last4} · expires {String(card.card.expMonth).padStart(2, "0")}/{card.card.expYear}
                {card.isDefault ? <span class="badge"> Default</span> : null}
                {card.isDefault && v.failingCard ? <span class="badge failing"> Declined</span> : null}
              </span>
              <span>
                {card.isDefault ? null : (
                  <form method="post" action={`${v.base}/cards/${card.id}/default`}>
                    <button type="submit" class="secondary">
                      Make default
                    </button>
                  </form>
                )}{" "}
                <form method="post" action={`${v.base}/cards/${card.id}/remove`}>
                  <button type="submit" class="secondary" aria-label={`Remove ${card.card.brand} ending ${card.card.last4}`}>
                    Remove
                  </button>
                </form>
              </span>
            </li>
          ))}
        </ul>
        {v.testCards ? (
          <form method="post" action={`${v.base}/cards`}>
            <div class="field">
              <label for="token">Add a test card</label>
              <select id="token" name="token">
                {v.testCards.map((t) => (
                  <option value={t.token}>{t.label}</option>
                ))}
              </select>
            </div>
            <button type="submit">Add card</button>
          </form>
        ) : null}
      </section>

      <section class="card" aria-labelledby="invoices">
        <h2 id="invoices">Invoices</h2>
        {v.invoices.length === 0 ? (
          <p class="muted">No invoices yet.</p>
        ) : (
          <div class="table-wrap">
            <table class="invoices">
              <thead>
                <tr>
                  <th scope="col">Invoice</th>
                  <th scope="col" class="date">
                    Date (UTC)
                  </th>
                  <th scope="col" class="period">
                    Period
                  </th>
                  <th scope="col">Status</th>
                  <th scope="col" class="amount">
                    Total
                  </th>
                  <th scope="col" class="amount">
                    Owed
                  </th>
                  <th scope="col">
                    <span class="visually-hidden">Actions</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {v.invoices.map((i) => {
                  const owed = (i.status === "open" || i.status === "uncollectible") && !i.paying;
                  const name = i.number ?? i.id;
                  return (
                    <tr>
                      <td class="number" data-label="Invoice">
                        <a href={`${v.base}/invoices/${i.id}`} aria-label={`Invoice ${name}`}>
                          {name}
                        </a>
                      </td>
                      <td class="date" data-label="Date (UTC)">
                        {day(i.createdAt)}
                      </td>
                      <td class="period" data-label="Period">
                        {day(i.periodStart)} – {day(i.periodEnd)}
                      </td>
                      <td data-label="Status">
                        <span class={`status ${i.paying ? "open" : i.status}`}>{i.paying ? "Payment being confirmed" : (INVOICE_STATUS[i.status] ?? i.status)}</span>
                      </td>
                      <td class="amount" data-label="Total">
                        {money(i.totalCents)}
                      </td>
                      <td class="amount" data-label="Owed">
                        {i.status === "open" || i.status === "uncollectible" ? money(i.amountDueCents) : "—"}
                      </td>
                      <td class="actions">
                        <a href={`${v.base}/invoices/${i.id}/pdf`} aria-label={`Invoice ${name} as PDF`}>
                          PDF
                        </a>
                        {owed && !featured.has(i.id) ? <PayForm v={v} invoice={i} label={`Pay ${money(i.amountDueCents)}`} /> : null}
                      </td>
                    </tr>
                  );
                })}
              </tbody>
            </table>
          </div>
        )}
      </section>
    </Layout>
  );
}

/** A change shown before it is confirmed: the preview's lines and the amount the card is charged now. */
function ChangePage(props: {
  base: string;
  returnUrl: string;
  currency: string;
  planName: string;
  tier: string;
  key: string;
  alert: Alert;
  /** a change of a paid plan */
  preview: Preview | null;
  /** a free platform's first plan: the price charged now, to this card */
  subscribe: { priceCents: number; card: string | null } | null;
}) {
  const money = (cents: number) => formatMoney(cents, props.currency);
  const p = props.preview;
  return (
    <Layout title={`Change to ${props.planName}`} returnUrl={props.returnUrl}>
      <AlertBox alert={props.alert} />
      <section class="card" aria-labelledby="summary">
        <h2 id="summary">What happens</h2>
        {p && p.prorationDate !== null ? (
          <>
            <p>
              {props.planName} starts now. For the rest of this period you are charged the difference, to the second:
            </p>
            <table>
              <tbody>
                {p.lines.map((line) => (
                  <tr>
                    <td>{line.description}</td>
                    <td class="amount">{money(line.amountCents)}</td>
                  </tr>
                ))}
              </tbody>
              <tfoot>
                {p.taxCents > 0 ? (
                  <tr>
                    <th scope="row">Tax</th>
                    <td class="amount">{money(p.taxCents)}</td>
                  </tr>
                ) : null}
                {p.creditAppliedCents > 0 ? (
                  <tr>
                    <th scope="row">Credit applied</th>
                    <td class="amount">{money(-p.creditAppliedCents)}</td>
                  </tr>
                ) : null}
                <tr>
                  <th scope="row">Charged now</th>
                  <td class="amount">{money(p.amountDueCents)}</td>
                </tr>
              </tfoot>
            </table>
          </>
        ) : null}
        {p && p.prorationDate === null ? (
          <p>
            {p.newTier === p.currentTier
              ? `You stay on ${props.planName}: the change that was waiting is called off.`
              : `${props.planName} starts on ${day(p.effectiveAt)}, at the end of this period. Nothing is charged now and nothing is refunded.`}
          </p>
        ) : null}
        {props.subscribe ? (
          <p>
            {money(props.subscribe.priceCents)} is charged now for the first month{props.subscribe.card ? `, to ${props.subscribe.card}` : ""}.
          </p>
        ) : null}
        {props.subscribe && !props.subscribe.card ? (
          <p>Add a card on the billing page first.</p>
        ) : (
          <form method="post" action={`${props.base}/change`}>
            <input type="hidden" name="tier" value={props.tier} />
            <input type="hidden" name="key" value={props.key} />
            {p?.prorationDate ? <input type="hidden" name="prorationDate" value={String(p.prorationDate)} /> : null}
            {p ? <input type="hidden" name="expectedAmountDueCents" value={String(p.amountDueCents)} /> : null}
            <button type="submit">{p && p.amountDueCents === 0 && !props.subscribe ? "Confirm" : "Confirm and pay"}</button>
          </form>
        )}
        <p>
          <a href={props.base}>Back to billing</a>
        </p>
      </section>
    </Layout>
  );
}

function MessagePage(props: { title: string; text: string; returnUrl: string | null }) {
  return (
    <Layout title={props.title} returnUrl={props.returnUrl}>
      <div class="card">
        <p>{props.text}</p>
      </div>
    </Layout>
  );
}

function render(c: Context, node: Child, status: ContentfulStatusCode = 200) {
  for (const [name, value] of Object.entries(PAGE_HEADERS)) c.header(name, value);
  return c.html(html`<!DOCTYPE html>${node}`, status);
}

export const renderPortal = (c: Context, view: PortalView, alert: Alert = null, status: ContentfulStatusCode = 200) => render(c, <PortalPage view={view} alert={alert} />, status);

export const renderChange = (c: Context, props: Parameters<typeof ChangePage>[0], status: ContentfulStatusCode = 200) => render(c, <ChangePage {...props} />, status);

export const renderMessage = (c: Context, props: { title: string; text: string; returnUrl: string | null }, status: ContentfulStatusCode) =>
  render(c, <MessagePage {...props} />, status);
