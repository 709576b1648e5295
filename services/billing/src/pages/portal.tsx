import type { Context } from "hono";
import { html } from "hono/html";
import type { Child } from "hono/jsx";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { previewJson } from "../changes.js";
import { formatMoney } from "../money.js";
import type { Plan } from "../plans.js";
import type { PaymentMethodView } from "../provider/types.js";
import type { subscriptionJson } from "../subscriptions.js";
import type { currentUsage } from "../usage.js";
import { BILLING_STYLESHEET_PATH, PAGE_HEADERS } from "./invoice.js";

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

/** Everything the portal's main page shows (DESIGN §6.1). */
export interface PortalView {
  base: string;
  returnUrl: string;
  email: string;
  currency: string;
  subscription: Subscription;
  plan: Plan;
  plans: Plan[];
  usage: Usage;
  invoices: PortalInvoice[];
  upcoming: PortalUpcoming | null;
  cards: (PaymentMethodView & { isDefault: boolean })[];
  /** the test cards a person can add (local provider), or null */
  testCards: { token: string; label: string }[] | null;
}

export type Alert = { kind: "success" | "error" | "info"; text: string } | null;

const day = (seconds: number | null) => (seconds === null ? "—" : new Date(seconds * 1000).toISOString().slice(0, 10));

const STATUS: Record<Subscription["status"], string> = { active: "Active", trialing: "Trial", past_due: "Payment failed: retrying", canceled: "Canceled" };

function Layout(props: { title: string; returnUrl: string | null; children: Child }) {
  return (
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>{`${props.title} · Core billing`}</title>
        <link rel="stylesheet" href={BILLING_STYLESHEET_PATH} />
      </head>
      <body>
        <main>
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

function PortalPage(props: { view: PortalView; alert: Alert }) {
  const v = props.view;
  const s = v.subscription;
  const money = (cents: number) => formatMoney(cents, v.currency);
  const paid = s.tier !== "free";
  return (
    <Layout title="Billing" returnUrl={v.returnUrl}>
      <AlertBox alert={props.alert} />
      <section class="card" aria-labelledby="plan">
        <h2 id="plan">Your plan</h2>
        <dl class="facts">
          <dt>Plan</dt>
          <dd>
            {s.quantity === 1 ? v.plan.name : `${s.quantity} × ${v.plan.name}`} · {money(v.plan.priceCents * s.quantity)} a month
          </dd>
          <dt>Status</dt>
          <dd>{STATUS[s.status]}</dd>
          <dt>Period</dt>
          <dd>
            {day(s.currentPeriodStart)} to {day(s.currentPeriodEnd)}
          </dd>
          {s.trialEnd && s.status === "trialing" ? (
            <>
              <dt>Trial ends</dt>
              <dd>{day(s.trialEnd)}</dd>
            </>
          ) : null}
          <dt>Next charge</dt>
          <dd>{nextCharge(v)}</dd>
          <dt>Billing email</dt>
          <dd>{v.email}</dd>
        </dl>
        {paid && !s.cancelAtPeriodEnd ? (
          <form method="post" action={`${v.base}/cancel`}>
            <button type="submit" class="danger">
              Cancel at the end of the period
            </button>
          </form>
        ) : null}
        {paid && s.cancelAtPeriodEnd ? (
          <form method="post" action={`${v.base}/resume`}>
            <button type="submit">Keep my plan</button>
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
                <td>{m.meter.replaceAll("_", " ")}</td>
                <td class="amount">{m.quantity}</td>
                <td class="amount">{m.included}</td>
              </tr>
            ))}
          </tbody>
        </table>
        {v.usage.estimatedOverageCents > 0 ? <p>Usage beyond the plan so far: {money(v.usage.estimatedOverageCents)}, invoiced after the period.</p> : null}
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
        {v.invoices.length === 0 ? <p class="muted">No invoices yet.</p> : null}
        <ul class="items invoices">
          {v.invoices.map((i) => (
            <li>
              <a href={`${v.base}/invoices/${i.id}`}>{i.number ?? i.id}</a>
              <span>{day(i.createdAt)}</span>
              <span class="amount">{money(i.totalCents)}</span>
              <span>{i.paying ? "payment being confirmed" : i.status}</span>
              {i.status === "open" && !i.paying ? (
                <form method="post" action={`${v.base}/invoices/${i.id}/pay`}>
                  <input type="hidden" name="key" value={crypto.randomUUID()} />
                  <button type="submit">Pay {money(i.amountDueCents)} now</button>
                </form>
              ) : null}
            </li>
          ))}
        </ul>
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
