import type { BillingClient, Invoice, Plan, ProrationPreview, Subscription, UpcomingInvoice } from "../billing-client.js";
import type { Context, Outcome } from "../context.js";
import { failures } from "../failures.js";
import { groupThousands, money, plural, table, when } from "../format.js";
import { Unreachable, type Refusal, type Reply } from "../http.js";
import { resolveBillingUrl } from "../settings.js";
import { tokenToSend, type TokenToSend } from "./token.js";
import { identityOf } from "./whoami.js";

/** Spec §2.7: the tiers a platform can pay for (free is where it starts). */
const PAID_TIERS = ["starter", "growth", "scale"];
/** A payment method id, or one of Stripe's test tokens the local provider knows (DESIGN §6.1). */
const CARD = /^pm_[A-Za-z0-9_]{1,250}$/;
/** Without --card: Stripe's test Visa, which the local provider accepts (DESIGN §6.1). */
export const DEFAULT_CARD = "pm_card_visa";
/** Spec §8: a page of invoices holds 1 to 100 (billing's limit parameter; default 25). */
const INVOICE_LIMIT = { min: 1, max: 100, fallback: 25 };

export interface BillingOptions {
  billingUrl?: string;
  token?: string;
  /** an operator names the platform; a tenant's own is the default */
  platform?: string;
}

/**
 * `core billing …`: a tenant owner's plan and payments (spec §4.4, DESIGN §6) from a terminal or a
 * script. Reading needs `billing:read`, changing `billing:manage` (a platform's owners have both);
 * operators act on any platform with `--platform <id>`. Money is shown from integer cents.
 */
export const billing = {
  async status(ctx: Context, options: BillingOptions): Promise<Outcome> {
    const session = await connect(ctx, options);
    const platformId = await platformOf(ctx, session);
    const [subscription, plans, upcoming] = await Promise.all([
      ask(session, "Reading the subscription", (b) => b.subscription(platformId)),
      ask(session, "Reading the plans", (b) => b.plans()),
      ask(session, "Reading the next charge", (b) => b.upcoming(platformId)),
    ]);
    const plan = planOf(plans, subscription.tier);
    return {
      text: [
        `Platform ${subscription.platformId}: ${planName(plan, subscription.tier)}${seats(subscription.quantity)}, ${subscription.status}`,
        ...subscriptionLines(subscription, plans, upcoming),
      ].join("\n"),
      json: { ...subscription, upcoming },
    };
  },

  async plans(ctx: Context, options: BillingOptions): Promise<Outcome> {
    // a price list: no credential needed, so none is sent
    const client = ctx.billing(resolveBillingUrl(options.billingUrl, ctx.settings), undefined);
    const plans = await ask({ client, source: "no credential" }, "Reading the plans", (b) => b.plans());
    if (!Array.isArray(plans)) throw failures.billingAnswerUnreadable(client.baseUrl);
    const text = `${table(
      ["TIER", "NAME", "PRICE", "INCLUDED EACH MONTH"],
      plans.map((p) => [p.tier, p.name, `${money(p.priceCents, p.currency)}/${p.interval}`, included(p)]),
    )}\nUpgrade a free platform: core billing upgrade <tier>; change a paid one: core billing change-tier <tier>`;
    return { text, json: plans };
  },

  async upgrade(ctx: Context, options: BillingOptions, tier: string, input: { card?: string; email?: string }): Promise<Outcome> {
    checkTier(tier);
    const card = input.card ?? DEFAULT_CARD;
    if (!CARD.test(card)) throw failures.invalidArgument(`Invalid --card "${card}": expected a payment method id or a Stripe test token (pm_card_visa, pm_card_mastercard, …)`);
    const session = await connect(ctx, options);
    const [plans, billingEmail] = await Promise.all([ask(session, "Reading the plans", (b) => b.plans()), input.email ?? whoIs(ctx, session).then((who) => who.email)]);
    const plan = planOf(plans, tier);
    if (!plan) throw failures.invalidArgument(`Billing at ${session.client.baseUrl} has no ${tier} plan: core billing plans lists them`);
    // a new key each run: billing answers a retry of the same request once, and charges once (DESIGN §6.6)
    const idempotencyKey = globalThis.crypto.randomUUID();
    const answer = await ask(session, `Upgrading to ${tier}`, (b) => b.upgrade({ planId: plan.id, paymentMethodId: card, billingEmail, idempotencyKey }, options.platform), { tier, card });
    const { subscription, invoice } = answer;
    const upcoming = await ask(session, "Reading the next charge", (b) => b.upcoming(subscription.platformId));
    return {
      text: [
        `Upgraded platform ${subscription.platformId} to ${planName(plan, tier)}: charged ${money(invoice.amountDueCents, invoice.currency)} to ${card}.`,
        `  invoice:     ${invoice.number ?? invoice.id} (${invoice.status})`,
        `  email:       ${billingEmail}`,
        ...subscriptionLines(subscription, plans, upcoming),
      ].join("\n"),
      json: answer,
    };
  },

  /**
   * Shows the proration preview, asks (unless `--yes`), then changes with the preview's
   * `prorationDate` and `expectedAmountDueCents`: billing charges exactly what was shown, or
   * nothing (409 AMOUNT_CHANGED). Without a terminal to ask on and without `--yes`, nothing changes.
   */
  async changeTier(ctx: Context, options: BillingOptions, tier: string, input: { yes: boolean }): Promise<Outcome> {
    checkTier(tier);
    const session = await connect(ctx, options);
    const preview = await ask(session, `Previewing the change to ${tier}`, (b) => b.prorationPreview(tier, options.platform), { tier });
    const upgrade = preview.prorationDate !== null;
    // asking for the current tier while a downgrade waits calls the downgrade off (DESIGN §6.3)
    const callOff = preview.currentTier === preview.newTier;
    ctx.say(previewLines(preview).join("\n"));

    const question = callOff
      ? `Keep ${tier} and call off the waiting change?`
      : !upgrade
        ? `Schedule the change to ${tier} for ${when(preview.effectiveAt)}?`
        : preview.amountDueCents > 0
          ? `Charge ${money(preview.amountDueCents, preview.currency)} now?`
          : `Change to ${tier} now, charging nothing?`;
    if (!input.yes) {
      if (!ctx.interactive) throw failures.confirmationNeeded(question, { details: { preview } });
      const answer = await ctx.readStdinLine(`${question} [y/N]`);
      if (!/^y(es)?$/i.test(answer.trim())) throw failures.notConfirmed({ details: { preview } });
    }

    const change = await ask(
      session,
      `Changing to ${tier}`,
      (b) => b.changeTier({ tier, ...(upgrade ? { prorationDate: preview.prorationDate! } : {}), expectedAmountDueCents: preview.amountDueCents }, options.platform),
      { tier, preview },
    );
    const { subscription, invoice } = change;
    const [plans, upcoming] = await Promise.all([ask(session, "Reading the plans", (b) => b.plans()), ask(session, "Reading the next charge", (b) => b.upcoming(subscription.platformId))]);
    const charged = invoice ? `: charged ${money(invoice.amountDueCents, invoice.currency)} (invoice ${invoice.number ?? invoice.id}, ${invoice.status})` : "";
    const head = callOff
      ? `Called off the waiting change: platform ${subscription.platformId} stays on ${tier}, and nothing was charged.`
      : upgrade
        ? `Changed platform ${subscription.platformId} to ${tier}${charged}.`
        : `Scheduled the change to ${tier} for ${when(subscription.currentPeriodEnd)}: ${subscription.tier} stays until then, and nothing was charged.`;
    return { text: [head, ...subscriptionLines(subscription, plans, upcoming)].join("\n"), json: { preview, ...change } };
  },

  async cancel(ctx: Context, options: BillingOptions): Promise<Outcome> {
    const session = await connect(ctx, options);
    const subscription = await ask(session, "Cancelling the subscription", (b) => b.cancel(options.platform));
    return {
      text: `Cancelled platform ${subscription.platformId}'s ${subscription.tier} plan at the period's end: it stays until ${when(subscription.currentPeriodEnd)}, then the platform returns to free. Nothing more is charged.`,
      json: subscription,
    };
  },

  async invoices(ctx: Context, options: BillingOptions, input: { limit?: string; cursor?: string }): Promise<Outcome> {
    const limit = invoiceLimit(input.limit);
    const session = await connect(ctx, options);
    const platformId = await platformOf(ctx, session);
    const page = await ask(session, "Listing the invoices", (b) => b.invoices(platformId, limit, input.cursor));
    if (!Array.isArray(page.data)) throw failures.billingAnswerUnreadable(session.client.baseUrl);
    const rows = page.data.map((i: Invoice) => [
      i.number ?? i.id,
      i.status,
      money(i.totalCents, i.currency),
      money(i.amountDueCents, i.currency),
      `${day(i.periodStart)} → ${day(i.periodEnd)}`,
      when(i.createdAt),
    ]);
    const text =
      rows.length === 0
        ? `Platform ${platformId} has no invoices${input.cursor ? " after this cursor" : ""}.`
        : [
            table(["NUMBER", "STATUS", "TOTAL", "AMOUNT DUE", "PERIOD", "CREATED"], rows),
            page.cursor ? `${plural(rows.length, "invoice")}, newest first; more: core billing invoices --cursor ${page.cursor}` : plural(rows.length, "invoice"),
          ].join("\n");
    return { text, json: page };
  },
};

/** Billing's address and the credential to send (`--token`, else CORE_TOKEN, else the stored login). */
async function connect(ctx: Context, options: BillingOptions): Promise<Session> {
  const baseUrl = resolveBillingUrl(options.billingUrl, ctx.settings);
  const credential = await tokenToSend(ctx, options.token);
  return { client: ctx.billing(baseUrl, credential.token), source: credential.source, credential, platform: options.platform };
}

interface Session {
  client: BillingClient;
  /** how a message names the credential sent */
  source: string;
  /** none for the price list */
  credential?: TokenToSend;
  /** `--platform` */
  platform?: string;
}

/**
 * The platform to read: `--platform`, else the one IAM says the credential's organization has.
 * Billing's GET /subscription and GET /invoices require it (spec §4.4), also for a platform's owner.
 */
async function platformOf(ctx: Context, session: Session): Promise<string> {
  if (session.platform !== undefined) return session.platform;
  const { platformId } = await whoIs(ctx, session);
  if (!platformId) throw failures.noPlatform();
  return platformId;
}

/** Who IAM says the credential sent stands for: its email and its organization's platform. */
function whoIs(ctx: Context, { credential }: Session) {
  if (credential === undefined) throw new Error("core billing asks IAM only about a credential it sends");
  return identityOf(ctx, credential.iamUrl, credential.token, credential.source);
}

/** What a refusal was about, for its hint. */
interface Subject {
  tier?: string;
  card?: string;
  preview?: ProrationPreview;
}

/** One request: its answer, or a failure with billing's code and message and what to do next. */
async function ask<T>(session: Session, action: string, call: (client: BillingClient) => Promise<Reply<T>>, subject: Subject = {}): Promise<T> {
  let reply: Reply<T>;
  try {
    reply = await call(session.client);
  } catch (err) {
    if (err instanceof Unreachable) throw failures.billingUnreachable(session.client.baseUrl, err.reason);
    throw err;
  }
  if (!("ok" in reply)) throw failures.refused(action, reply.refused, hintFor(reply.refused, subject, session));
  return reply.ok;
}

/** What to do about each of billing's error codes (DESIGN §3, §6). */
function hintFor(refusal: Refusal, { tier, card, preview }: Subject, { client, source }: Session): string | null {
  switch (refusal.code) {
    case "UNAUTHENTICATED":
      return `Billing at ${client.baseUrl} does not accept ${source}: it expired or was revoked. Run: core login`;
    case "FORBIDDEN":
      return "Reading billing needs billing:read, changing it billing:manage (a platform's owners have both); operators name the platform with --platform <id>.";
    case "PAYMENT_DECLINED":
      return card
        ? `Nothing was charged and the plan did not change. Try another card: core billing upgrade ${tier} --card <pm_…>`
        : "Nothing was charged and the plan did not change: the default card was refused. Add another card in the customer portal.";
    case "ALREADY_SUBSCRIBED":
      return `The platform has a paid plan already: change it with core billing change-tier ${tier}`;
    case "USE_UPGRADE":
      return `The platform is on free: move it to a paid plan with core billing upgrade ${tier}, which takes a card.`;
    case "SAME_TIER":
      return "Nothing to change: core billing status shows the plan.";
    case "AMOUNT_CHANGED": {
      const now = (refusal.details as { amountDueCents?: unknown } | null)?.amountDueCents;
      const amount = preview && typeof now === "number" ? `now ${money(now, preview.currency)}, not the ${money(preview.amountDueCents, preview.currency)} shown` : "not the amount shown";
      return `The amount due is ${amount}; nothing was charged. Run core billing change-tier ${tier} again to see the new amount.`;
    }
    case "NOT_SUBSCRIBED":
      return "The platform is on free: there is no paid plan to cancel.";
    case "PAYMENT_PENDING":
      return refusal.status === 503
        ? "The payment provider did not answer yet: billing asks it again, and nothing is charged twice. core billing status shows the outcome in a minute or two."
        : "A payment of this subscription is being confirmed with the payment provider: try again once core billing status shows it settled.";
    case "CHANGE_IN_PROGRESS":
    case "IDEMPOTENCY_KEY_IN_USE":
      return "Another change of this subscription was under way: try again.";
    case "NOT_FOUND":
      return "core whoami shows your platform; an operator names an existing one with --platform <id>.";
    case "RATE_LIMITED":
      return "Too many requests: wait a little and try again.";
    default:
      return null;
  }
}

function checkTier(tier: string) {
  if (!PAID_TIERS.includes(tier)) throw failures.invalidArgument(`Invalid tier "${tier}": expected starter, growth or scale`);
}

function invoiceLimit(raw: string | undefined): number {
  if (raw === undefined) return INVOICE_LIMIT.fallback;
  const value = Number(raw);
  if (!/^[0-9]+$/.test(raw) || value < INVOICE_LIMIT.min || value > INVOICE_LIMIT.max) {
    throw failures.invalidArgument(`Invalid --limit "${raw}": expected a whole number from ${INVOICE_LIMIT.min} to ${INVOICE_LIMIT.max}`);
  }
  return value;
}

const planOf = (plans: Plan[], tier: string) => (Array.isArray(plans) ? plans.find((p) => p.tier === tier) : undefined);
const planName = (plan: Plan | undefined, tier: string) => (plan ? `${plan.name} (${tier})` : tier);
const seats = (quantity: number) => (quantity > 1 ? ` × ${quantity}` : "");

/**
 * The period and what billing charges next: the upcoming invoice's amount (DESIGN §6.9: tax, credit
 * and this period's usage so far included), or why nothing is. Without it (`undefined`: not asked),
 * the plan's price.
 */
function subscriptionLines(s: Subscription, plans: Plan[], upcoming?: UpcomingInvoice | null): string[] {
  const lines = [`  period:      ${when(s.currentPeriodStart)} → ${when(s.currentPeriodEnd)}`];
  if (s.status === "trialing" && s.trialEnd !== null) lines.push(`  trial:       ends ${when(s.trialEnd)}`);
  const chargeAt = s.status === "trialing" && s.trialEnd !== null ? s.trialEnd : s.currentPeriodEnd;
  const nextTier = s.pendingTier ?? s.tier;
  const nextPlan = planOf(plans, nextTier);
  const quantity = s.pendingQuantity ?? s.quantity;
  let next: string;
  if (s.cancelAtPeriodEnd) next = `none — cancels on ${when(s.currentPeriodEnd)}, then the platform is on free`;
  else if (upcoming) next = `${money(upcoming.amountDueCents, upcoming.currency)} on ${when(upcoming.nextChargeAt)}${upcoming.taxCents > 0 ? `, ${money(upcoming.taxCents, upcoming.currency)} tax included` : ""}`;
  else if (nextTier === "free" || upcoming === null) next = "none (the free plan)";
  else if (!nextPlan) next = `the ${nextTier} plan's price on ${when(chargeAt)}`;
  else next = `${money(nextPlan.priceCents * quantity, nextPlan.currency)} on ${when(chargeAt)}, before tax`;
  if (!s.cancelAtPeriodEnd && s.pendingTier) next += `, when the change to ${planName(nextPlan, s.pendingTier)} takes effect`;
  lines.push(`  next charge: ${next}`);
  if (s.status === "past_due") lines.push("  The last payment failed: billing retries it, and a new default card is tried at once.");
  return lines;
}

/** The preview as a person reads it: each line, then what is due now. */
function previewLines(p: ProrationPreview): string[] {
  if (p.currentTier === p.newTier) return [`The platform is on ${p.currentTier}, and a change waits for the period's end: keeping ${p.currentTier} calls it off. Nothing is charged.`];
  if (p.prorationDate === null) {
    return [`Changing from ${p.currentTier} to ${p.newTier} at the period's end, ${when(p.effectiveAt)}: ${p.currentTier} stays until then, nothing is charged now and nothing is refunded.`];
  }
  const amount = (cents: number) => money(cents, p.currency);
  const rows = p.lines.map((line) => [`  ${line.description}`, amount(line.amountCents)]);
  if (p.taxCents !== 0) rows.push(["  Tax", amount(p.taxCents)]);
  if (p.creditAppliedCents !== 0) rows.push(["  Credit applied", amount(-p.creditAppliedCents)]);
  rows.push(["  Due now", amount(p.amountDueCents)]);
  const width = Math.max(...rows.map(([label]) => label!.length));
  const valueWidth = Math.max(...rows.map(([, value]) => value!.length));
  return [`Changing from ${p.currentTier} to ${p.newTier} now (prorated to the second):`, ...rows.map(([label, value]) => `${label!.padEnd(width)}  ${value!.padStart(valueWidth)}`)];
}

/** The plan's included usage, in the plan's meters. */
function included(plan: Plan): string {
  const entries = Object.entries(plan.included ?? {});
  return entries.length === 0 ? "-" : entries.map(([meter, quantity]) => `${grouped(quantity)} ${meter.replace(/_/g, " ")}`).join(", ");
}

/** "1000000" → "1,000,000"; decimals keep their fraction. */
const grouped = (quantity: string) => quantity.replace(/^\d+/, groupThousands);

/** Unix seconds as the UTC date. */
const day = (seconds: number) => when(seconds).slice(0, 10);
