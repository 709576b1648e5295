import Decimal from "decimal.js";
import { z } from "@hono/zod-openapi";
import { unkeepableText } from "@core/kit";

/**
 * A usage event as reported (DESIGN §6.5), checked on its own so one bad event never costs the batch
 * its other events. What is kept of a valid event is canonical: the quantity as its shortest exact
 * decimal text, the timestamp as a Date to the millisecond. Two reports of one event are the same
 * content when these agree, however each was written (`1` or `"1.0"`, seconds or ISO 8601).
 */

/** At most this many decimal places in a quantity (DESIGN §6.5; Stripe's `unit_amount_decimal` has 12). */
export const QUANTITY_SCALE = 12;
/** A quantity is below 10^20 (at most 20 integer digits): sums of a period stay far inside the columns' 26. */
const QUANTITY_DIGITS = 20;

const Exact = Decimal.clone({ precision: 80, toExpNeg: -100, toExpPos: 100 });

// control characters would be kept, but they break logs, CSV exports and terminals: refused
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
const text = (max: number) =>
  z
    .string()
    .min(1)
    .max(max)
    .refine((value) => !CONTROL.test(value) && unkeepableText(value) === null, "Must not contain control characters or lone surrogates");

const PLAIN_DECIMAL = /^[0-9]{1,40}(\.[0-9]{1,40})?$/;
// RFC 3339: a date, a time and an offset; fractions of a second allowed
const ISO_8601 = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$/;

const EventSchema = z
  .object({
    id: text(128),
    platformId: text(128),
    tenantId: text(128).nullish(),
    stackId: text(128).nullish(),
    meter: text(64),
    quantity: z.union([z.number(), z.string().max(80)]),
    timestamp: z.union([z.number(), z.string().max(64)]),
  })
  .strict();

export interface UsageEvent {
  /** the event's place in its batch */
  index: number;
  id: string;
  platformId: string;
  /** "" when not given */
  tenantId: string;
  stackId: string;
  meter: string;
  /** canonical decimal text: "1", "0.3" */
  quantity: string;
  occurredAt: Date;
}

export interface Rejection {
  index: number;
  /** null when the event carried no usable id */
  id: string | null;
  code: string;
  message: string;
}

const DIGITS = /^([0-9]+)(?:\.([0-9]+))?$/;

/**
 * Plain decimal text in its canonical form: no leading zeros, no trailing fractional zeros, no
 * exponent ("007.50" → "7.5"). Text work, not arithmetic: ingestion does this for every event.
 */
function canonicalDigits(whole: string, fraction: string | undefined): string {
  const w = whole.replace(/^0+(?=\d)/, "");
  const f = (fraction ?? "").replace(/0+$/, "");
  return f === "" ? w : `${w}.${f}`;
}

/** A quantity as canonical decimal text, or why it cannot be one. */
export function parseQuantity(value: number | string): { ok: true; quantity: string } | { ok: false; reason: string } {
  let text: string;
  if (typeof value === "number") {
    if (!Number.isFinite(value)) return { ok: false, reason: "quantity must be a finite number" };
    if (value < 0) return { ok: false, reason: "quantity must not be negative" };
    // the shortest decimal text of the number is what the client wrote (0.1 stays 0.1); an exponent
    // form (1e-7, 1e+21) is spelled out exactly
    text = String(value);
    if (text.includes("e")) text = new Exact(text).toFixed();
  } else {
    if (!PLAIN_DECIMAL.test(value)) return { ok: false, reason: 'quantity must be a plain decimal, such as "12" or "0.25"' };
    text = value;
  }
  const [, whole, fraction] = DIGITS.exec(text)!;
  const quantity = canonicalDigits(whole!, fraction);
  const dot = quantity.indexOf(".");
  if (dot !== -1 && quantity.length - dot - 1 > QUANTITY_SCALE) return { ok: false, reason: `quantity has at most ${QUANTITY_SCALE} decimal places` };
  if ((dot === -1 ? quantity.length : dot) > QUANTITY_DIGITS) return { ok: false, reason: "quantity must be below 10^20" };
  return { ok: true, quantity };
}

/** A timestamp (Unix seconds, or ISO 8601 with an offset) as a Date to the millisecond. */
export function parseTimestamp(value: number | string): Date | null {
  let ms: number;
  if (typeof value === "number") {
    if (!Number.isFinite(value)) return null;
    ms = Math.round(value * 1000);
  } else {
    if (!ISO_8601.test(value)) return null;
    ms = Date.parse(value.replace(" ", "T"));
  }
  if (!Number.isFinite(ms) || ms < 0 || ms > 253_402_300_799_000) return null;
  return new Date(ms);
}

const idOf = (raw: unknown): string | null => {
  const id = typeof raw === "object" && raw !== null ? (raw as { id?: unknown }).id : undefined;
  return typeof id === "string" && id.length >= 1 && id.length <= 128 && !CONTROL.test(id) && unkeepableText(id) === null ? id : null;
};

const invalid = (index: number, raw: unknown, message: string): Rejection => ({ index, id: idOf(raw), code: "VALIDATION_ERROR", message });

/** One reported event, checked: a usage event, or its rejection with a message that names the field. */
export function parseEvent(raw: unknown, index: number): UsageEvent | Rejection {
  const parsed = EventSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    if (issue.code === "unrecognized_keys") return invalid(index, raw, `Unknown field "${issue.keys[0]!.slice(0, 64)}"`);
    const field = issue.path.join(".") || "(event)";
    return invalid(index, raw, `${field}: ${issue.message}`);
  }
  const event = parsed.data;
  const quantity = parseQuantity(event.quantity);
  if (!quantity.ok) return invalid(index, raw, quantity.reason);
  const occurredAt = parseTimestamp(event.timestamp);
  if (!occurredAt) return invalid(index, raw, "timestamp must be Unix seconds or an ISO 8601 date and time with its offset (2026-02-14T09:30:00Z)");
  return {
    index,
    id: event.id,
    platformId: event.platformId,
    tenantId: event.tenantId ?? "",
    stackId: event.stackId ?? "",
    meter: event.meter,
    quantity: quantity.quantity,
    occurredAt,
  };
}

export const isRejection = (value: UsageEvent | Rejection): value is Rejection => "code" in value;

/** Whether two reports carry the same event: everything but the batch position agrees. */
export function sameContent(a: Omit<UsageEvent, "index">, b: Omit<UsageEvent, "index">): boolean {
  return (
    a.platformId === b.platformId &&
    a.id === b.id &&
    a.tenantId === b.tenantId &&
    a.stackId === b.stackId &&
    a.meter === b.meter &&
    a.occurredAt.getTime() === b.occurredAt.getTime() &&
    // both canonical: equal values are equal text
    a.quantity === b.quantity
  );
}

/**
 * A timestamp as the database driver answers a raw query: a Date, or PostgreSQL's text
 * ("2026-01-31 10:00:00.123+00"), read as ISO 8601 so no year is guessed.
 */
export function pgTime(value: Date | string): Date {
  if (value instanceof Date) return value;
  const iso = value.replace(" ", "T").replace(/([+-]\d{2})$/, "$1:00");
  return new Date(iso);
}

/** A canonical decimal from the database's numeric text ("1.500000000000" → "1.5", "-2.50" → "-2.5"). */
export function canonical(numeric: string): string {
  const negative = numeric.startsWith("-");
  const match = DIGITS.exec(negative ? numeric.slice(1) : numeric);
  if (!match) return new Exact(numeric).toFixed();
  const text = canonicalDigits(match[1]!, match[2]);
  return negative && text !== "0" ? `-${text}` : text;
}

export { Exact as UsageDecimal };
