import { callService, download, type Download, type Reply } from "./http.js";

/** A plan of the price list (DESIGN §6.2); `priceCents` in the currency's minor units. */
export interface Plan {
  id: string;
  tier: string;
  name: string;
  currency: string;
  priceCents: number;
  interval: string;
  priceId: string;
  included: Record<string, string>;
  overageUnitCents: Record<string, string>;
}

/** A platform's current subscription (DESIGN §6.3); times are Unix seconds. */
export interface Subscription {
  id: string;
  platformId: string;
  customerId: string | null;
  tier: string;
  planId: string;
  status: string;
  billingAnchor: number;
  currentPeriodStart: number;
  currentPeriodEnd: number;
  cancelAtPeriodEnd: boolean;
  canceledAt: number | null;
  trialEnd: number | null;
  pendingTier: string | null;
  quantity: number;
  pendingQuantity: number | null;
  metadata: Record<string, unknown>;
  createdAt: number;
}

export interface InvoiceLine {
  description: string;
  amountCents: number;
  periodStart: number | null;
  periodEnd: number | null;
  /** decimal strings (DESIGN §6.4); a proration preview's lines have neither */
  quantity?: string | null;
  unitAmountCents?: string | null;
  /** the line's tax rate, when billing states one (DESIGN §6.11) */
  taxRatePercent?: string | number | null;
}

/** An invoice (DESIGN §6.4), amounts in minor units. */
export interface Invoice {
  id: string;
  number: string | null;
  status: string;
  currency: string;
  totalCents: number;
  amountDueCents: number;
  amountPaidCents: number;
  periodStart: number;
  periodEnd: number;
  createdAt: number;
  lines: InvoiceLine[];
  subtotalCents?: number;
  taxCents?: number;
  creditAppliedCents?: number;
  finalizedAt?: number | null;
  paidAt?: number | null;
  customerSnapshot?: { email: string; name: string | null; address?: unknown; taxIds?: unknown; [field: string]: unknown };
  /** DESIGN §6.10, §6.11: present once billing states them */
  seller?: { name?: string; [field: string]: unknown } | null;
  taxRatePercent?: string | number | null;
  taxBaseCents?: number | null;
  taxTreatment?: string | null;
  amountRefundedCents?: number;
  amountCreditedCents?: number;
}

/** A card of the platform's customer (DESIGN §6.1). */
export interface PaymentMethod {
  id: string;
  type: string;
  customerId: string | null;
  card: { brand: string; last4: string; expMonth: number; expYear: number; funding: string };
  createdAt: number;
  isDefault: boolean;
}

/** What a tier change would charge (DESIGN §6.3): the same computation as the change itself. */
export interface ProrationPreview {
  currentTier: string;
  newTier: string;
  effectiveAt: number;
  prorationDate: number | null;
  currency: string;
  lines: InvoiceLine[];
  subtotalCents: number;
  taxCents: number;
  creditAppliedCents: number;
  amountDueCents: number;
}

/** What the next renewal will charge (DESIGN §6.9, `GET /invoices/upcoming`): tax, credit and usage so far included. */
export interface UpcomingInvoice {
  status?: string;
  periodStart?: number;
  periodEnd?: number;
  chargeCents?: number;
  totalCents?: number;
  taxRatePercent?: string | number | null;
  currency: string;
  subtotalCents: number;
  taxCents: number;
  creditAppliedCents: number;
  amountDueCents: number;
  nextChargeAt: number;
  lines: InvoiceLine[];
}

export interface SubscriptionChange {
  subscription: Subscription;
  invoice: Invoice | null;
}

/**
 * Billing's routes the CLI calls (spec §4.4), at one base address. Table A's routes answer under
 * `/api/billing` and without it alike; the CLI uses the short form. `platformId` is for operators,
 * who name the platform; a tenant's own platform is the default where the route allows it.
 * Throws `Unreachable`.
 */
export class BillingClient {
  constructor(
    readonly baseUrl: string,
    private readonly options: { token: string | undefined; userAgent: string; debug: (line: string) => void },
  ) {}

  /** The price list: no credential needed. */
  plans(): Promise<Reply<Plan[]>> {
    return this.call("GET", "/plans", undefined);
  }

  /** Spec §4.4 requires `platformId` here, also for a platform's own owner. */
  subscription(platformId: string): Promise<Reply<Subscription>> {
    return this.call("GET", `/subscription${query({ platformId })}`, undefined);
  }

  upgrade(body: { planId: string; paymentMethodId: string; billingEmail: string; idempotencyKey: string }, platformId?: string): Promise<Reply<{ subscription: Subscription; invoice: Invoice }>> {
    return this.call("POST", `/api/billing/upgrade${query({ platformId })}`, body);
  }

  prorationPreview(tier: string, platformId?: string): Promise<Reply<ProrationPreview>> {
    return this.call("GET", `/subscription/proration-preview${query({ tier, platformId })}`, undefined);
  }

  /** With the preview's `prorationDate` and `expectedAmountDueCents`, the charge is the preview's or nothing (409 AMOUNT_CHANGED). */
  changeTier(body: { tier: string; prorationDate?: number; expectedAmountDueCents?: number }, platformId?: string): Promise<Reply<SubscriptionChange>> {
    return this.call("POST", `/subscription/change-tier${query({ platformId })}`, body);
  }

  cancel(platformId?: string): Promise<Reply<Subscription>> {
    return this.call("POST", `/subscription/cancel${query({ platformId })}`, undefined);
  }

  /** The next charge; null when nothing will be charged (404 NO_UPCOMING_INVOICE: on free, or ending). */
  async upcoming(platformId: string): Promise<Reply<UpcomingInvoice | null>> {
    const reply = await this.call<UpcomingInvoice>("GET", `/invoices/upcoming${query({ platformId })}`, undefined);
    return "refused" in reply && reply.refused.code === "NO_UPCOMING_INVOICE" ? { ok: null } : reply;
  }

  /** Newest first; `cursor` is null on the last page. */
  invoices(platformId: string, limit: number, cursor?: string): Promise<Reply<{ data: Invoice[]; cursor: string | null }>> {
    return this.call("GET", `/invoices${query({ platformId, limit: String(limit), cursor })}`, undefined);
  }

  /** Calls off a cancellation at the period's end. */
  resume(platformId?: string): Promise<Reply<Subscription>> {
    return this.call("POST", `/subscription/resume${query({ platformId })}`, undefined);
  }

  /** One invoice with its lines (with `platformId`, it must be that platform's). */
  invoice(id: string, platformId?: string): Promise<Reply<Invoice>> {
    return this.call("GET", `/invoices/${encodeURIComponent(id)}${query({ platformId })}`, undefined);
  }

  /** The invoice's PDF (DESIGN §6.11). */
  invoicePdf(id: string, platformId?: string): Promise<Download> {
    return download(`${this.baseUrl}/invoices/${encodeURIComponent(id)}/pdf${query({ platformId })}`, "application/pdf", this.credentialOptions());
  }

  cards(platformId?: string): Promise<Reply<{ data: PaymentMethod[] }>> {
    return this.call("GET", `/payment-methods${query({ platformId })}`, undefined);
  }

  /** Attaches a card; the key makes a retry attach it once (DESIGN §6.6). */
  addCard(body: { paymentMethodId: string; setAsDefault?: boolean }, idempotencyKey: string, platformId?: string): Promise<Reply<PaymentMethod>> {
    return this.call("POST", `/payment-methods${query({ platformId })}`, body, 201, { "idempotency-key": idempotencyKey });
  }

  removeCard(id: string, platformId?: string): Promise<Reply<PaymentMethod>> {
    return this.call("DELETE", `/payment-methods/${encodeURIComponent(id)}${query({ platformId })}`, undefined);
  }

  /** Makes a card the default; refused renewals are retried with it at once, so the key guards a retry. */
  setDefaultCard(id: string, idempotencyKey: string, platformId?: string): Promise<Reply<PaymentMethod>> {
    return this.call("POST", `/payment-methods/${encodeURIComponent(id)}/default${query({ platformId })}`, undefined, 200, { "idempotency-key": idempotencyKey });
  }

  /** A customer portal session of an hour (DESIGN §6.1): `{ id, url }`. */
  portal(returnUrl: string, platformId?: string): Promise<Reply<{ id: string; url: string }>> {
    return this.call("POST", `/portal${query({ platformId })}`, { returnUrl }, 201);
  }

  private credentialOptions() {
    return { credential: this.options.token, userAgent: this.options.userAgent, debug: this.options.debug };
  }

  private call<T>(method: string, path: string, body: unknown, expected = 200, headers?: Record<string, string>): Promise<Reply<T>> {
    return callService(method, `${this.baseUrl}${path}`, body, expected, { ...this.credentialOptions(), headers });
  }
}

/** `?a=1&b=2` of the parameters that are set, or "" when none is. */
function query(parameters: Record<string, string | undefined>): string {
  const set = Object.entries(parameters).filter((entry): entry is [string, string] => entry[1] !== undefined);
  return set.length === 0 ? "" : `?${new URLSearchParams(set).toString()}`;
}
