import { and, eq, isNotNull, isNull, or, sql } from "drizzle-orm";
import { randomBytes } from "node:crypto";
import { z } from "@hono/zod-openapi";
import { badRequest, conflict, decodeCursor, forbidden, newId, resourceNotFound, toPage, unixSeconds } from "@core/kit";
import { isUniqueViolation, keysetAfter, keysetOrder, type Db, type KeysetColumns } from "@core/storage";
import { customers, type Address, type CustomerRow, type TaxExempt, type TaxId } from "./db/schema.js";
import { isCountry, reverseChargeProblem, TAX_ID_TYPES, taxIdProblem } from "./tax.js";
import type { Engine } from "./engine.js";
import type { PaymentMethodView } from "./provider/types.js";

const PREFIX_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789";

/** An invoice number prefix of 8 letters and digits, unique among customers ("3F9KQ2XA-0001"). */
function invoicePrefix(): string {
  return [...randomBytes(8)].map((b) => PREFIX_ALPHABET[b % PREFIX_ALPHABET.length]).join("");
}

/** The customer of DESIGN §6.3 in its answer's shape (Unix seconds). */
export function customerJson(row: CustomerRow) {
  return {
    id: row.id,
    email: row.email,
    name: row.name,
    metadata: row.metadata,
    platformId: row.platformId,
    userId: row.userId,
    balanceCents: row.balanceCents,
    currency: row.currency,
    defaultPaymentMethodId: row.defaultPaymentMethodId,
    address: row.address ?? null,
    taxIds: row.taxIds ?? [],
    taxExempt: row.taxExempt,
    taxExemptionRequested: row.taxExemptionRequestedAt ? { note: row.taxExemptionNote!, requestedAt: unixSeconds(row.taxExemptionRequestedAt) } : null,
    createdAt: unixSeconds(row.createdAt),
  };
}

// C0 and C1 control characters (newlines and tabs too): a buyer's details are single lines on an invoice
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

/** One line of text a buyer gives: trimmed, 1 to `max` characters, no control characters. */
export const TextLine = (max: number) =>
  z
    .string()
    .trim()
    .min(1)
    .max(max)
    .refine((s) => !CONTROL.test(s), "must not contain control characters (line breaks, tabs …)");
const OptionalLine = (max: number) =>
  z
    .string()
    .trim()
    .max(max)
    .refine((s) => !CONTROL.test(s), "must not contain control characters (line breaks, tabs …)")
    .nullable()
    .optional()
    .transform((s) => (s ? s : null));

/** Limits of a buyer's details (DESIGN §6.11; Stripe's are close: 200 for a line, 5 tax ids shown on invoices). */
export const BUYER_LIMITS = { name: 200, line: 200, city: 100, postalCode: 20, taxIds: 5, taxIdValue: 64, taxExemptionNote: 500 } as const;

export const BuyerName = TextLine(BUYER_LIMITS.name);

export const AddressInput = z
  .object({
    line1: TextLine(BUYER_LIMITS.line),
    line2: OptionalLine(BUYER_LIMITS.line),
    city: TextLine(BUYER_LIMITS.city),
    postalCode: OptionalLine(BUYER_LIMITS.postalCode),
    state: z
      .string()
      .trim()
      .toUpperCase()
      .regex(/^[A-Z0-9]{1,3}$/, "the region's code (CA for California, BY for Bavaria), 1 to 3 letters or digits")
      .nullable()
      .optional()
      .or(z.literal("").transform(() => null))
      .transform((s) => s ?? null),
    country: z
      .string()
      .trim()
      .toUpperCase()
      .refine(isCountry, "an ISO 3166-1 alpha-2 country code such as DE or US"),
  })
  .strict()
  .openapi("AddressInput");

export const TaxIdInput = z
  .object({
    type: z.enum(TAX_ID_TYPES).openapi({ description: "Stripe's tax id type" }),
    value: TextLine(BUYER_LIMITS.taxIdValue),
  })
  .strict()
  .superRefine((id, check) => {
    const problem = taxIdProblem(id);
    if (problem) check.addIssue({ code: "custom", message: problem, path: ["value"] });
  })
  .openapi("TaxIdInput");

export const TaxIdsInput = z
  .array(TaxIdInput)
  .max(BUYER_LIMITS.taxIds, `at most ${BUYER_LIMITS.taxIds} tax ids`)
  .refine((ids) => new Set(ids.map((id) => `${id.type}:${id.value.toUpperCase()}`)).size === ids.length, "each tax id once");

export const TaxExemptInput = z.enum(["none", "exempt", "reverse"]);

/** A buyer's request to be made tax exempt: why, in one line (a charity's register number, a public body's name). */
export const TaxExemptionRequestInput = z.object({ note: TextLine(BUYER_LIMITS.taxExemptionNote) }).strict().openapi("TaxExemptionRequestInput");

export interface NewCustomer {
  email: string;
  name?: string | null;
  metadata?: Record<string, unknown>;
  platformId?: string | null;
  userId?: string | null;
  currency: string;
}

/** Creates a customer; a second customer of one platform is refused by the unique index. */
export async function createCustomer(db: Db, now: Date, input: NewCustomer): Promise<CustomerRow> {
  for (let attempt = 0; ; attempt++) {
    try {
      const [row] = await db
        .insert(customers)
        .values({
          id: newId("cus"),
          platformId: input.platformId ?? null,
          userId: input.userId ?? null,
          email: input.email.toLowerCase(),
          name: input.name ?? null,
          metadata: input.metadata ?? {},
          currency: input.currency,
          invoicePrefix: invoicePrefix(),
          createdAt: now,
          updatedAt: now,
        })
        .returning();
      return row!;
    } catch (err) {
      // 32^8 prefixes: a clash is rare, and drawing again settles it
      if (attempt < 5 && isUniqueViolation(err, "customers_invoice_prefix_key")) continue;
      throw err;
    }
  }
}

export interface CustomerChange {
  email?: string;
  name?: string | null;
  /** replaces the address; null removes it */
  address?: Address | null;
  /** replaces the list */
  taxIds?: TaxId[];
  taxExempt?: TaxExempt;
  /** the buyer's request to be made tax exempt, with its note; null withdraws it (the buyer) or dismisses it (the seller) */
  taxExemptionRequested?: { note: string } | null;
  /** merged into the customer's metadata; a key set to null is removed */
  metadata?: Record<string, unknown>;
}

/**
 * Who changes a customer (docs/vault/cross-cutting/security.md, Billing): the buyer (a tenant's member,
 * its portal session) or the seller (operators, services). Only the seller makes a customer exempt.
 */
export type CustomerEditor = "buyer" | "seller";

/**
 * What a change does to the customer's tax exemption and its request: a buyer cannot set `exempt`
 * (403; one exempt already may keep it) and records a request instead; the seller's `taxExempt` (any
 * value) settles a pending request, and the seller only ever dismisses one.
 */
function exemptionOf(before: CustomerRow, change: CustomerChange, editor: CustomerEditor, now: Date): Partial<Pick<CustomerRow, "taxExemptionNote" | "taxExemptionRequestedAt">> {
  const taxExempt = change.taxExempt ?? before.taxExempt;
  if (editor === "buyer" && change.taxExempt === "exempt" && before.taxExempt !== "exempt") {
    throw forbidden("Only the seller makes a customer tax exempt: record taxExemptionRequested with a note saying why (a charity's register number, a public body), and an operator decides");
  }
  const asked = change.taxExemptionRequested;
  if (asked === null) return { taxExemptionNote: null, taxExemptionRequestedAt: null };
  if (asked !== undefined) {
    if (editor === "seller") throw badRequest("An operator answers a request for tax exemption by setting taxExempt (or dismisses it with taxExemptionRequested: null); only the buyer makes one", { path: "taxExemptionRequested" });
    if (taxExempt === "exempt") throw conflict("ALREADY_TAX_EXEMPT", "The customer is tax exempt already: there is nothing to request");
    // the same request saved again (the portal's form) keeps the day it was made
    if (before.taxExemptionRequestedAt && before.taxExemptionNote === asked.note) return {};
    return { taxExemptionNote: asked.note, taxExemptionRequestedAt: now };
  }
  // the seller's decision, whatever it is, answers the request
  if (editor === "seller" && change.taxExempt !== undefined) return { taxExemptionNote: null, taxExemptionRequestedAt: null };
  return {};
}

/** Stripe's limit on a customer's metadata keys. */
const MAX_METADATA_KEYS = 50;

/**
 * Updates a customer's email, name, metadata or buyer details (DESIGN §6.3, §6.11), at the provider
 * too. Invoices already finalized keep the customer as it was (their customerSnapshot).
 *
 * `reverse` is accepted only for a buyer it applies to now (an `eu_vat` id of its own EU country,
 * another than the seller's), checked against the details as they will be after the change: a
 * change that breaks it (another country, the id removed) while `reverse` stays is refused the same
 * way. When the seller's country changes later, the customer keeps `reverse`, and each invoice
 * decides again (`decideTax`): where it no longer holds, the buyer's country's rate applies.
 * `exempt` is the seller's alone, and a buyer's request for it is recorded for the operators' list
 * (`exemptionOf`).
 */
export async function updateCustomer(engine: Engine, id: string, change: CustomerChange, editor: CustomerEditor): Promise<{ before: CustomerRow; after: CustomerRow }> {
  const before = await findCustomer(engine.db, id);
  const now = await engine.time.now();
  const exemption = exemptionOf(before, change, editor, now);
  const taxExempt = change.taxExempt ?? before.taxExempt;
  const touchesTax = change.taxExempt !== undefined || change.address !== undefined || change.taxIds !== undefined;
  if (taxExempt === "reverse" && touchesTax) {
    const problem = reverseChargeProblem({ address: change.address !== undefined ? change.address : (before.address ?? null), taxIds: change.taxIds ?? before.taxIds ?? [] }, engine.tax.seller);
    if (problem) throw badRequest(problem, { path: "taxExempt" });
  }
  const metadata = { ...before.metadata };
  for (const [key, value] of Object.entries(change.metadata ?? {})) {
    if (value === null) delete metadata[key];
    else metadata[key] = value;
  }
  if (Object.keys(metadata).length > MAX_METADATA_KEYS) throw badRequest(`metadata may hold at most ${MAX_METADATA_KEYS} keys`, { path: "metadata" });
  const [after] = await engine.db
    .update(customers)
    .set({
      ...(change.email !== undefined ? { email: change.email.toLowerCase() } : {}),
      ...(change.name !== undefined ? { name: change.name } : {}),
      ...(change.address !== undefined ? { address: change.address } : {}),
      ...(change.taxIds !== undefined ? { taxIds: change.taxIds } : {}),
      ...(change.taxExempt !== undefined ? { taxExempt: change.taxExempt } : {}),
      ...exemption,
      metadata,
      updatedAt: now,
    })
    .where(eq(customers.id, before.id))
    .returning();
  return { before, after: await atProvider(engine, after!) };
}

/** The customer, known to the payment provider too (DESIGN §6.1: Stripe keeps its own record of it). */
export async function atProvider(engine: Engine, row: CustomerRow): Promise<CustomerRow> {
  await engine.provider.upsertCustomer({ id: row.id, email: row.email, name: row.name });
  return row;
}

/** Makes an attached card the customer's default, at the provider and in the engine; answers the customer. */
export async function setDefaultCard(engine: Engine, customerId: string, paymentMethodId: string): Promise<CustomerRow> {
  await engine.provider.setDefaultPaymentMethod(customerId, paymentMethodId);
  const [row] = await engine.db
    .update(customers)
    .set({ defaultPaymentMethodId: paymentMethodId, updatedAt: await engine.time.now() })
    .where(eq(customers.id, customerId))
    .returning();
  if (!row) throw resourceNotFound("customer");
  return row;
}

/** A payment method of this customer, or 404 (another customer's is as unknown as a made-up id). */
export async function cardOfCustomer(engine: Engine, customer: CustomerRow, paymentMethodId: string): Promise<PaymentMethodView> {
  const card = await engine.provider.find(paymentMethodId);
  if (!card || card.customerId !== customer.id) throw resourceNotFound("payment method", "the customer has no such card");
  return card;
}

/**
 * Detaches a card from its customer, at the provider and in the engine: when it was the default, the
 * customer has none until another is set (DESIGN §6.3). Answers the card, and the customer row when
 * its default was cleared (null when the card was not the default).
 */
export async function detachCard(engine: Engine, customerId: string, paymentMethodId: string): Promise<{ card: PaymentMethodView; defaultCleared: CustomerRow | null }> {
  const card = await engine.provider.detach(customerId, paymentMethodId);
  const [row] = await engine.db
    .update(customers)
    .set({ defaultPaymentMethodId: null, updatedAt: await engine.time.now() })
    .where(and(eq(customers.id, customerId), eq(customers.defaultPaymentMethodId, paymentMethodId)))
    .returning();
  return { card, defaultCleared: row ?? null };
}

export async function findCustomer(db: Db, id: string): Promise<CustomerRow> {
  const [row] = await db.select().from(customers).where(eq(customers.id, id));
  if (!row) throw resourceNotFound("customer");
  return row;
}

export async function customerOfPlatform(db: Db, platformId: string): Promise<CustomerRow | null> {
  const [row] = await db.select().from(customers).where(eq(customers.platformId, platformId));
  return row ?? null;
}

/** The one customer a user is linked to: the user who upgraded, or `metadata.userId` given at creation. */
export async function customerOfUser(db: Db, userId: string): Promise<CustomerRow> {
  const rows = await db
    .select()
    .from(customers)
    .where(or(eq(customers.userId, userId), sql`${customers.metadata} ->> 'userId' = ${userId}`));
  if (rows.length === 0) throw resourceNotFound("customer", "none is linked to this userId: create one with metadata.userId");
  if (rows.length > 1) throw conflict("SEVERAL_CUSTOMERS", `User ${userId} is linked to ${rows.length} customers (${rows.map((r) => r.id).join(", ")}): subscribe one platform with POST /api/billing/upgrade`);
  return rows[0]!;
}

/**
 * The platform's customer, made on its first paid step (upgrade) or brought up to date: the
 * billing email given last is the one invoices go to.
 */
export async function ensurePlatformCustomer(db: Db, now: Date, input: NewCustomer & { platformId: string }): Promise<CustomerRow> {
  const existing = await customerOfPlatform(db, input.platformId);
  if (existing) {
    const email = input.email.toLowerCase();
    // a customer made before it had a name (or by a path that had none) takes the platform's now
    const name = existing.name ?? input.name ?? null;
    if (existing.email === email && (!input.userId || existing.userId === input.userId) && name === existing.name) return existing;
    const [row] = await db
      .update(customers)
      .set({ email, name, userId: existing.userId ?? input.userId ?? null, updatedAt: now })
      .where(eq(customers.id, existing.id))
      .returning();
    return row!;
  }
  try {
    return await createCustomer(db, now, input);
  } catch (err) {
    // two first upgrades of one platform at once: the other made it
    if (isUniqueViolation(err, "customers_platform_key")) return (await customerOfPlatform(db, input.platformId))!;
    throw err;
  }
}

const CUSTOMERS_NEWEST_FIRST: KeysetColumns = { key: customers.createdAt, tie: customers.id, direction: "desc" };

/** `%`, `_` and `\` stand for themselves in a search, not for LIKE's wildcards. */
const likeLiteral = (text: string) => text.replace(/[\\%_]/g, (c) => `\\${c}`);

/**
 * `GET /customers` (DESIGN §6.12): a page of customers, newest first, for operators.
 *
 * `email` searches case-insensitively from the start of the address or of its domain, as a person
 * types it: "acme" finds acme@example.com and billing@acme.com, "billing@ac" finds billing@acme.com,
 * "acme.com" every address at acme.com. Not anywhere inside (a substring such as "cme" finds nothing):
 * a prefix is what a B-tree index serves, so the search stays an index scan however many customers
 * there are (the expression indexes `customers_email_search_idx` and `customers_email_domain_idx`,
 * text_pattern_ops, so LIKE 'x%' uses them whatever the database's collation). A substring would need
 * pg_trgm, an extension not every PostgreSQL (nor PGlite) has. `taxExemptionRequested` finds the
 * customers whose request for tax exemption waits for an operator's answer. Filters combine with AND.
 */
export async function listCustomers(db: Db, query: { email?: string; platformId?: string; taxExemptionRequested?: boolean; limit: number; cursor?: string }) {
  const after = decodeCursor(query.cursor, { key: "timestamp", tie: "id" });
  // a cursor of another listing (an invoice's, a subscription's) is no position in this one
  if (after && !after.id.startsWith("cus_")) throw badRequest("Invalid cursor", { path: "cursor" });
  const email = query.email === undefined ? undefined : `${likeLiteral(query.email.toLowerCase())}%`;
  const rows = await db
    .select()
    .from(customers)
    .where(
      and(
        query.platformId === undefined ? undefined : eq(customers.platformId, query.platformId),
        query.taxExemptionRequested === undefined ? undefined : query.taxExemptionRequested ? isNotNull(customers.taxExemptionRequestedAt) : isNull(customers.taxExemptionRequestedAt),
        email === undefined ? undefined : or(sql`lower(${customers.email}) like ${email}`, sql`split_part(lower(${customers.email}), '@', 2) like ${email}`),
        keysetAfter(CUSTOMERS_NEWEST_FIRST, after),
      ),
    )
    .orderBy(...keysetOrder(CUSTOMERS_NEWEST_FIRST))
    .limit(query.limit + 1);
  const page = toPage(rows, query.limit, (r) => ({ k: r.createdAt, id: r.id }));
  return { data: page.data.map(customerJson), cursor: page.cursor };
}
