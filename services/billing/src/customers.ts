import { eq } from "drizzle-orm";
import { randomBytes } from "node:crypto";
import { newId, notFound, unixSeconds } from "@core/kit";
import { isUniqueViolation, type Db } from "@core/storage";
import { customers, type CustomerRow } from "./db/schema.js";
import type { Engine } from "./engine.js";

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
    createdAt: unixSeconds(row.createdAt),
  };
}

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
  if (!row) throw notFound(`No customer ${customerId}`);
  return row;
}

export async function findCustomer(db: Db, id: string): Promise<CustomerRow> {
  const [row] = await db.select().from(customers).where(eq(customers.id, id));
  if (!row) throw notFound(`No customer ${id}`);
  return row;
}

export async function customerOfPlatform(db: Db, platformId: string): Promise<CustomerRow | null> {
  const [row] = await db.select().from(customers).where(eq(customers.platformId, platformId));
  return row ?? null;
}

/**
 * The platform's customer, made on its first paid step (upgrade) or brought up to date: the
 * billing email given last is the one invoices go to.
 */
export async function ensurePlatformCustomer(db: Db, now: Date, input: NewCustomer & { platformId: string }): Promise<CustomerRow> {
  const existing = await customerOfPlatform(db, input.platformId);
  if (existing) {
    const email = input.email.toLowerCase();
    if (existing.email === email && (!input.userId || existing.userId === input.userId)) return existing;
    const [row] = await db
      .update(customers)
      .set({ email, userId: existing.userId ?? input.userId ?? null, updatedAt: now })
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
