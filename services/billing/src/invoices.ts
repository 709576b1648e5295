import { and, eq, ne } from "drizzle-orm";
import { decodeCursor, toPage } from "@core/kit";
import { keysetAfter, keysetOrder, type Db, type KeysetColumns } from "@core/storage";
import { invoices, type InvoiceRow } from "./db/schema.js";
import { invoiceJson, linesOfMany } from "./invoicing.js";

/**
 * Reading invoices (DESIGN §6.4): what table A and the portal show. A draft is no one's to read, so
 * every listing here leaves drafts out. Making, finalizing and paying invoices is `invoicing.ts` and
 * `collection.ts`.
 */

const NEWEST_FIRST: KeysetColumns = { key: invoices.createdAt, tie: invoices.seq, direction: "desc" };

/** An invoice by its id, whatever its status or platform (the caller checks who may read it), or null. */
export async function invoiceById(db: Db, id: string): Promise<InvoiceRow | null> {
  const [row] = await db.select().from(invoices).where(eq(invoices.id, id));
  return row ?? null;
}

/** A finalized invoice of the platform, or null. */
export async function finalizedInvoiceOf(db: Db, platformId: string, id: string): Promise<InvoiceRow | null> {
  const [row] = await db
    .select()
    .from(invoices)
    .where(and(eq(invoices.id, id), eq(invoices.platformId, platformId), ne(invoices.status, "draft")));
  return row ?? null;
}

/** The platform's latest finalized invoices, newest first. */
export async function latestInvoices(db: Db, platformId: string, limit: number, after: { k: Date; id: number } | null = null): Promise<InvoiceRow[]> {
  return db
    .select()
    .from(invoices)
    .where(and(eq(invoices.platformId, platformId), ne(invoices.status, "draft"), keysetAfter(NEWEST_FIRST, after)))
    .orderBy(...keysetOrder(NEWEST_FIRST))
    .limit(limit);
}

/** A page of the platform's finalized invoices, newest first, with their lines, in their answer's shape. */
export async function listInvoices(db: Db, platformId: string, page: { limit: number; cursor?: string }) {
  const rows = await latestInvoices(db, platformId, page.limit + 1, decodeCursor(page.cursor, { key: "timestamp", tie: "sequence" }));
  const { data, cursor } = toPage(rows, page.limit, (r) => ({ k: r.createdAt, id: r.seq }));
  // one query for the lines of the whole page, not one per invoice
  const lines = await linesOfMany(db, data.map((row) => row.id));
  return { data: data.map((row) => invoiceJson(row, lines.get(row.id)!)), cursor };
}
