import { randomBytes } from "node:crypto";
import { link, open, rename, stat, unlink } from "node:fs/promises";
import { basename, dirname, join, resolve } from "node:path";
import type { BillingClient, Invoice, InvoiceLine, PaymentMethod, Plan, ProrationPreview, Subscription, UpcomingInvoice } from "../billing-client.js";
import type { Context, Outcome } from "../context.js";
import { CliFailure, failures } from "../failures.js";
import { decimalMoney, groupThousands, money, plural, table, when } from "../format.js";
import { Unreachable, type Refusal, type Reply } from "../http.js";
import { resolveBillingUrl } from "../settings.js";
import { tokenToSend, type TokenToSend } from "./token.js";
import { identityOf } from "./whoami.js";
import { browserToOffer, openAddress } from "./open-address.js";

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

  /**
   * Asks (unless `--yes`) before cancelling at the period's end. A free platform, or one cancelling
   * already, is not asked about: billing answers it (409 NOT_SUBSCRIBED, or the same subscription).
   */
  async cancel(ctx: Context, options: BillingOptions, input: { yes: boolean }): Promise<Outcome> {
    const session = await connect(ctx, options);
    const platformId = await platformOf(ctx, session);
    const current = await ask(session, "Reading the subscription", (b) => b.subscription(platformId));
    if (current.tier !== "free" && !current.cancelAtPeriodEnd) {
      await confirm(ctx, input.yes, `Cancel platform ${platformId}'s ${current.tier} plan at the period's end, ${when(current.currentPeriodEnd)}?`, { subscription: current });
    }
    const subscription = await ask(session, "Cancelling the subscription", (b) => b.cancel(options.platform), { command: "cancel" });
    return {
      text: `Cancelled platform ${subscription.platformId}'s ${subscription.tier} plan at the period's end: it stays until ${when(subscription.currentPeriodEnd)}, then the platform returns to free. Nothing more is charged.\nChanged your mind before then? core billing resume`,
      json: subscription,
    };
  },

  /** Calls off a cancellation at the period's end: the plan renews as before. Nothing is charged now. */
  async resume(ctx: Context, options: BillingOptions): Promise<Outcome> {
    const session = await connect(ctx, options);
    const subscription = await ask(session, "Resuming the subscription", (b) => b.resume(options.platform), { command: "resume" });
    const upcoming = await ask(session, "Reading the next charge", (b) => b.upcoming(subscription.platformId));
    const next = upcoming ? `: the next charge is ${money(upcoming.amountDueCents, upcoming.currency)} on ${when(upcoming.nextChargeAt)}` : "";
    return {
      text: `Platform ${subscription.platformId}'s ${subscription.tier} plan continues: it renews on ${when(subscription.currentPeriodEnd)}${next}.`,
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

  /** One invoice as a person reads it: who, the period, each line's quantity, unit price and amount, then the totals. */
  async invoice(ctx: Context, options: BillingOptions, id: string): Promise<Outcome> {
    checkInvoiceId(id);
    const session = await connect(ctx, options);
    const invoice = await ask(session, `Reading invoice ${id}`, (b) => b.invoice(id, options.platform), { invoiceId: id });
    return { text: invoiceText(invoice).join("\n"), json: invoice };
  },

  /**
   * Downloads the invoice's PDF to `output`: refused before anything is sent when the file exists
   * (unless `--force`); the answer must be a PDF; the file is written whole or not at all (a
   * temporary file in the same directory, fsync, then a link that fails if the file appeared
   * meanwhile, or a rename with `--force`).
   */
  async invoicePdf(ctx: Context, options: BillingOptions, id: string, input: { output?: string; force: boolean }): Promise<Outcome> {
    checkInvoiceId(id);
    if (input.output === undefined || input.output === "") throw failures.usage("Missing -o <file>: where to write the PDF", "billing invoices pdf");
    const target = resolve(input.output);
    if (!input.force && (await exists(target))) throw failures.fileExists(target);
    const session = await connect(ctx, options);
    const answer = await ask(session, `Downloading invoice ${id}'s PDF`, (b) => b.invoicePdf(id, options.platform), { invoiceId: id });
    const mediaType = answer.contentType.split(";")[0]!.trim().toLowerCase();
    if (mediaType !== "application/pdf" || answer.truncated || !answer.bytes.subarray(0, 5).equals(Buffer.from("%PDF-"))) {
      throw failures.notAPdf(session.client.baseUrl, answer.contentType || "no content type");
    }
    await writeWhole(target, answer.bytes, input.force);
    return {
      text: `Wrote invoice ${id} to ${input.output} (${groupThousands(String(answer.bytes.length))} bytes, PDF).`,
      json: { invoiceId: id, path: target, bytes: answer.bytes.length, contentType: answer.contentType },
    };
  },

  /** What the next renewal will charge: the upcoming invoice (DESIGN §6.9), or why nothing will be. */
  async upcoming(ctx: Context, options: BillingOptions): Promise<Outcome> {
    const session = await connect(ctx, options);
    const platformId = await platformOf(ctx, session);
    const upcoming = await ask(session, "Reading the next invoice", (b) => b.upcoming(platformId));
    if (!upcoming) {
      const subscription = await ask(session, "Reading the subscription", (b) => b.subscription(platformId));
      const why = subscription.cancelAtPeriodEnd
        ? `the plan cancels on ${when(subscription.currentPeriodEnd)} (core billing resume keeps it)`
        : "it is on the free plan";
      return { text: `Nothing will be charged to platform ${platformId}: ${why}.`, json: null };
    }
    return {
      text: [
        `Next invoice of platform ${platformId}: ${money(upcoming.amountDueCents, upcoming.currency)} on ${when(upcoming.nextChargeAt)}`,
        ...(upcoming.periodStart !== undefined && upcoming.periodEnd !== undefined ? [`  period:  ${day(upcoming.periodStart)} → ${day(upcoming.periodEnd)}`] : []),
        "",
        ...linesAndTotals(upcoming, upcoming.currency),
        ...(upcoming.chargeCents !== undefined && upcoming.chargeCents !== upcoming.amountDueCents
          ? [`Under the minimum charge, ${money(upcoming.amountDueCents - upcoming.chargeCents, upcoming.currency)} is carried to the invoice after it.`]
          : []),
      ].join("\n"),
      json: upcoming,
    };
  },

  /** The cards of the platform's customer; the default is the one renewals charge. */
  async cards(ctx: Context, options: BillingOptions): Promise<Outcome> {
    const session = await connect(ctx, options);
    const page = await ask(session, "Listing the cards", (b) => b.cards(options.platform));
    if (!Array.isArray(page.data)) throw failures.billingAnswerUnreadable(session.client.baseUrl);
    const text =
      page.data.length === 0
        ? "The platform has no cards. Add one: core billing cards add <pm_…> (Stripe test tokens such as pm_card_visa work with the local provider)."
        : [
            table(
              ["ID", "BRAND", "NUMBER", "EXPIRES", "FUNDING", "DEFAULT"],
              page.data.map((pm) => [pm.id, pm.card.brand, `•••• ${pm.card.last4}`, expiry(pm), pm.card.funding, pm.isDefault ? "yes" : ""]),
            ),
            page.data.some((pm) => pm.isDefault) ? plural(page.data.length, "card") : `${plural(page.data.length, "card")}, none the default: renewals cannot be charged. Choose one: core billing cards default <pm_…>`,
          ].join("\n");
    return { text, json: page };
  },

  /** Attaches a card (a payment method id, or a Stripe test token with the local provider); the first one, or `--default`, becomes the default. */
  async addCard(ctx: Context, options: BillingOptions, card: string, input: { setAsDefault: boolean }): Promise<Outcome> {
    checkCard(card, "card");
    const session = await connect(ctx, options);
    // a new key each run: a retry of this request attaches one card, not two (DESIGN §6.6)
    const key = globalThis.crypto.randomUUID();
    const pm = await ask(session, `Adding card ${card}`, (b) => b.addCard({ paymentMethodId: card, ...(input.setAsDefault ? { setAsDefault: true } : {}) }, key, options.platform), { command: "cards add", card });
    return {
      text: `Added ${cardName(pm)} (${pm.id})${pm.isDefault ? ": it is the default card, which renewals charge; payments that failed were tried again with it." : `. Make it the default: core billing cards default ${pm.id}`}`,
      json: pm,
    };
  },

  /**
   * Asks (unless `--yes`) before removing a card. Removing the default card is allowed also while a
   * paid plan runs (Stripe's rule), with a warning: the next renewal fails unless another is set.
   * An id that is not among the platform's cards is sent as it is, so billing's 404 answers it.
   */
  async removeCard(ctx: Context, options: BillingOptions, card: string, input: { yes: boolean }): Promise<Outcome> {
    checkCard(card, "payment method id");
    const session = await connect(ctx, options);
    const page = await ask(session, "Listing the cards", (b) => b.cards(options.platform));
    const found = Array.isArray(page.data) ? page.data.find((pm) => pm.id === card) : undefined;
    let warning: string | null = null;
    if (found) {
      if (found.isDefault) {
        const platformId = await platformOf(ctx, session);
        const subscription = await ask(session, "Reading the subscription", (b) => b.subscription(platformId));
        if (subscription.tier !== "free" && !subscription.cancelAtPeriodEnd) {
          const others = page.data.filter((pm) => pm.id !== card);
          warning =
            `Warning: ${card} is the default card, and the ${subscription.tier} plan renews on ${when(subscription.currentPeriodEnd)}: without a default card that payment fails. ` +
            (others.length > 0 ? `Make another the default: core billing cards default ${others[0]!.id}` : "Add another: core billing cards add <pm_…> --default");
          ctx.warn(warning);
        }
      }
      await confirm(ctx, input.yes, `Remove ${cardName(found)} (${card})?`, { card: found });
    }
    const removed = await ask(session, `Removing card ${card}`, (b) => b.removeCard(card, options.platform), { command: "cards remove", cardId: card });
    return { text: `Removed ${cardName(removed)} (${removed.id}).${warning ? " The platform has no default card now." : ""}`, json: removed };
  },

  /** Makes a card the default: renewals charge it, and payments that failed are tried again with it at once. */
  async defaultCard(ctx: Context, options: BillingOptions, card: string): Promise<Outcome> {
    checkCard(card, "payment method id");
    const session = await connect(ctx, options);
    const key = globalThis.crypto.randomUUID();
    const pm = await ask(session, `Making ${card} the default card`, (b) => b.setDefaultCard(card, key, options.platform), { command: "cards default", cardId: card });
    const platformId = await platformOf(ctx, session);
    const subscription = await ask(session, "Reading the subscription", (b) => b.subscription(platformId));
    const pastDue = subscription.status === "past_due" ? " The last payment is still refused: core billing status shows it." : "";
    return { text: `${cardName(pm)} (${pm.id}) is the default card now: renewals charge it, and payments that failed were tried again with it.${pastDue}`, json: pm };
  },

  /**
   * A customer portal session (DESIGN §6.1): prints its address, and at a terminal that can open a
   * browser offers to open it, as `core login` does. Back in the portal goes to `--return-url`, by
   * default the IAM account page of the login.
   */
  async portal(ctx: Context, options: BillingOptions, input: { returnUrl?: string; noBrowser: boolean }): Promise<Outcome> {
    const session = await connect(ctx, options);
    const returnUrl = input.returnUrl ?? `${session.credential!.iamUrl}/account`;
    if (!/^https?:\/\/[^\s]+$/i.test(returnUrl) || !URL.canParse(returnUrl)) throw failures.invalidArgument(`Invalid --return-url "${returnUrl}": expected an http(s) address`);
    const portal = await ask(session, "Opening a billing portal session", (b) => b.portal(returnUrl, options.platform), { command: "portal" });
    const opener = browserToOffer(ctx, !input.noBrowser);
    const text = [`Billing portal (valid for an hour; anyone with the address can use it until then):`, `  ${portal.url}`].join("\n");
    if (opener) {
      ctx.say(text);
      await ctx.readStdinLine(PRESS_ENTER_OR_LEAVE);
      await openAddress(ctx, opener, portal.url);
      return { text: "", json: portal };
    }
    return { text, json: portal };
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
  /** the card given to upgrade or cards add */
  card?: string;
  /** the card a cards command names */
  cardId?: string;
  invoiceId?: string;
  preview?: ProrationPreview;
  /** the command, where its hint differs from upgrade's and change-tier's */
  command?: "cancel" | "resume" | "cards add" | "cards remove" | "cards default" | "portal";
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
function hintFor(refusal: Refusal, { tier, card, cardId, invoiceId, preview, command }: Subject, { client, source }: Session): string | null {
  switch (refusal.code) {
    case "IDEMPOTENCY_KEY_REUSED":
      return "Run the command again.";
    case "UNAUTHENTICATED":
      return `Billing at ${client.baseUrl} does not accept ${source}: it expired or was revoked. Run: core login`;
    case "FORBIDDEN":
      return "Reading billing needs billing:read, changing it billing:manage (a platform's owners have both); operators name the platform with --platform <id>.";
    case "PAYMENT_DECLINED": {
      if (command === "cards add") {
        const declined = refusal.details as { code?: unknown; declineCode?: unknown } | null;
        const reason = typeof declined?.declineCode === "string" ? declined.declineCode : typeof declined?.code === "string" ? declined.code : "declined";
        return `The card was refused (${reason.replace(/_/g, " ")}): nothing was added. Try another card.`;
      }
      return card
        ? `Nothing was charged and the plan did not change. Try another card: core billing upgrade ${tier} --card <pm_…>`
        : "Nothing was charged and the plan did not change: the default card was refused. Add another: core billing cards add <pm_…> --default";
    }
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
      return command === "resume"
        ? "The platform is on free: there is nothing to resume. A plan that has ended starts again with core billing upgrade <tier>."
        : "The platform is on free: there is no paid plan to cancel.";
    case "NO_CUSTOMER":
      return "The platform has no billing customer yet: its owner makes one with core billing upgrade <tier> or core billing cards add <pm_…>.";
    case "NO_UPCOMING_INVOICE":
      return "Nothing will be charged: core billing status shows why.";
    case "PAYMENT_PENDING":
      return refusal.status === 503
        ? "The payment provider did not answer yet: billing asks it again, and nothing is charged twice. core billing status shows the outcome in a minute or two."
        : "A payment of this subscription is being confirmed with the payment provider: try again once core billing status shows it settled.";
    case "CHANGE_IN_PROGRESS":
    case "IDEMPOTENCY_KEY_IN_USE":
      return "Another change of this subscription was under way: try again.";
    case "NOT_FOUND":
      if (cardId) return "core billing cards lists the platform's cards.";
      if (invoiceId) return "core billing invoices lists the platform's invoices.";
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
  if (s.status === "past_due") lines.push("  The last payment failed: billing retries it, and a new default card is tried at once (core billing cards add <pm_…> --default).");
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

/** The prompt of `core billing portal` at a terminal: login's, and how to leave without opening. */
const PRESS_ENTER_OR_LEAVE = "Press Enter to open it in your browser (Ctrl-C to leave it closed).";

/**
 * Goes ahead with `--yes`, or when the person at the terminal answers y. Without a terminal and
 * without `--yes`, nothing changes (exit 1, CONFIRMATION_NEEDED); any other answer is NOT_CONFIRMED.
 */
async function confirm(ctx: Context, yes: boolean, question: string, details: Record<string, unknown>): Promise<void> {
  if (yes) return;
  if (!ctx.interactive) throw failures.confirmationNeeded(question, { details });
  const answer = await ctx.readStdinLine(`${question} [y/N]`);
  if (!/^y(es)?$/i.test(answer.trim())) throw failures.notConfirmed({ details });
}

/** Billing's ids: letters, digits, _ and -; anything else is refused before it is sent. */
const ID = /^[A-Za-z0-9_-]{1,255}$/;

function checkInvoiceId(id: string) {
  if (!ID.test(id)) throw failures.invalidArgument(`Invalid invoice id "${id}": expected an id such as in_… (core billing invoices --json lists them)`);
}

function checkCard(card: string, what: "card" | "payment method id") {
  if (!CARD.test(card)) {
    throw failures.invalidArgument(
      what === "card"
        ? `Invalid card "${card}": expected a payment method id or a Stripe test token (pm_card_visa, pm_card_mastercard, …)`
        : `Invalid payment method id "${card}": expected pm_… (core billing cards lists them)`,
    );
  }
}

const cardName = (pm: PaymentMethod) => `${pm.card.brand} •••• ${pm.card.last4}`;
const expiry = (pm: PaymentMethod) => `${String(pm.card.expMonth).padStart(2, "0")}/${pm.card.expYear}`;

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return false;
    throw failures.cannotWriteFile(path, (err as NodeJS.ErrnoException).code ?? String(err));
  }
}

/**
 * Writes `bytes` to `target` whole or not at all: a temporary file beside it, flushed to disk, then
 * linked into place (which fails when the file appeared meanwhile) or, with `force`, renamed over it.
 */
async function writeWhole(target: string, bytes: Buffer, force: boolean): Promise<void> {
  const temporary = join(dirname(target), `.${basename(target)}.${randomBytes(6).toString("hex")}.tmp`);
  try {
    const file = await open(temporary, "wx", 0o644);
    try {
      await file.writeFile(bytes);
      await file.sync();
    } finally {
      await file.close();
    }
    if (force) {
      await rename(temporary, target);
    } else {
      try {
        await link(temporary, target);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === "EEXIST") throw failures.fileExists(target);
        throw err;
      }
    }
  } catch (err) {
    if (err instanceof CliFailure) throw err;
    throw failures.cannotWriteFile(target, (err as NodeJS.ErrnoException).code ?? (err as Error).message);
  } finally {
    await unlink(temporary).catch(() => undefined);
  }
}

/** The invoice as a person reads it: seller and buyer as billing copied them at finalization (DESIGN §6.11), then lines and totals. */
function invoiceText(i: Invoice): string[] {
  const snapshot = i.customerSnapshot;
  const buyer = snapshot ? (snapshot.name ? `${snapshot.name} <${snapshot.email}>` : snapshot.email) : "";
  const seller = i.seller;
  const sellerTaxId = typeof seller?.taxId === "string" ? ` (tax id ${seller.taxId})` : "";
  const head = [
    `Invoice ${i.number ?? i.id} (${i.id}): ${i.status}${i.status === "paid" && i.paidAt ? ` on ${when(i.paidAt)}` : ""}`,
    ...(seller?.name ? [`  from:    ${seller.name}${sellerTaxId}`] : []),
    ...(buyer ? [`  to:      ${buyer}`] : []),
    ...[addressOf(snapshot?.address), ...taxIdsOf(snapshot?.taxIds)].filter((line): line is string => line !== null).map((line) => `           ${line}`),
    `  period:  ${day(i.periodStart)} → ${day(i.periodEnd)}`,
    `  issued:  ${when(i.finalizedAt ?? i.createdAt)}`,
  ];
  return [...head, "", ...linesAndTotals(i, i.currency), ...(i.taxTreatment === "reverse" ? ["Reverse charge: the buyer accounts for the VAT."] : [])];
}

/** A buyer's address on one line: "Hauptstr. 1, 10115 Berlin, DE". */
function addressOf(address: unknown): string | null {
  if (!address || typeof address !== "object") return null;
  const a = address as Record<string, unknown>;
  const text = (key: string) => (typeof a[key] === "string" && a[key] !== "" ? (a[key] as string) : null);
  const place = [text("postalCode"), text("city")].filter(Boolean).join(" ");
  const parts = [text("line1"), text("line2"), place || null, text("state"), text("country")].filter(Boolean);
  return parts.length > 0 ? parts.join(", ") : null;
}

/** The buyer's tax ids: "eu_vat DE123456789". */
function taxIdsOf(taxIds: unknown): string[] {
  if (!Array.isArray(taxIds)) return [];
  return taxIds.filter((t) => t && typeof t.type === "string" && typeof t.value === "string").map((t) => `${t.type} ${t.value}`);
}

/** The lines with their quantity, unit price and amount; amounts line up on the right. */
function linesTable(lines: InvoiceLine[], currency: string): string[] {
  if (!Array.isArray(lines) || lines.length === 0) return ["(no lines)"];
  const rows = lines.map((l) => [l.description, l.quantity == null ? "" : grouped(String(l.quantity)), l.unitAmountCents == null ? "" : decimalMoney(String(l.unitAmountCents), currency), money(l.amountCents, currency)]);
  const headers = ["DESCRIPTION", "QTY", "UNIT PRICE", "AMOUNT"];
  const widths = headers.map((h, c) => Math.max(h.length, ...rows.map((r) => r[c]!.length)));
  const format = (row: string[]) => row.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!))).join("  ");
  return [format(headers), ...rows.map(format)];
}

/** The lines, then the totals under the amount column. */
function linesAndTotals(i: Partial<Invoice> & { currency: string; amountDueCents: number; lines: InvoiceLine[] }, currency: string): string[] {
  const lines = linesTable(i.lines, currency);
  const width = Math.max(...lines.map((l) => l.length));
  return [...lines, "", ...totals(i, currency).map((row) => row.padStart(width))];
}

/** Subtotal, tax (with its rate and base when billing states them), credit, total and what is due, paid and given back. */
function totals(i: Partial<Invoice> & { currency: string; amountDueCents: number }, currency: string): string[] {
  const rows: [string, string][] = [];
  const m = (cents: number) => money(cents, currency);
  if (typeof i.subtotalCents === "number") rows.push(["Subtotal", m(i.subtotalCents)]);
  if (typeof i.taxCents === "number") {
    const rate = i.taxRatePercent != null ? ` (${i.taxRatePercent} %${typeof i.taxBaseCents === "number" && i.taxBaseCents !== i.subtotalCents ? ` of ${m(i.taxBaseCents)}` : ""})` : "";
    rows.push([i.taxTreatment === "reverse" ? "Tax (reverse charge)" : i.taxTreatment === "exempt" ? "Tax (exempt)" : `Tax${rate}`, m(i.taxCents)]);
  }
  if (typeof i.totalCents === "number") rows.push(["Total", m(i.totalCents)]);
  if (i.creditAppliedCents) rows.push(["Credit applied", m(-i.creditAppliedCents)]);
  rows.push(["Amount due", m(i.amountDueCents)]);
  if (typeof i.amountPaidCents === "number" && i.status !== "upcoming") rows.push(["Amount paid", m(i.amountPaidCents)]);
  if (i.amountRefundedCents) rows.push(["Refunded", m(i.amountRefundedCents)]);
  if (i.amountCreditedCents) rows.push(["Credited to balance", m(i.amountCreditedCents)]);
  const label = Math.max(...rows.map(([l]) => l.length));
  const value = Math.max(...rows.map(([, v]) => v.length));
  return rows.map(([l, v]) => `${l.padStart(label)}  ${v.padStart(value)}`);
}
