import type { Context } from "hono";
import { html } from "hono/html";
import { formatMoney } from "../money.js";
import type { invoiceJson } from "../invoicing.js";

type InvoiceView = ReturnType<typeof invoiceJson>;

/** Billing's pages: never cached, never framed, no script, forms only to ourselves (as IAM's). */
export const PAGE_HEADERS: Record<string, string> = {
  "cache-control": "no-store",
  "content-security-policy": "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  "x-frame-options": "DENY",
  "referrer-policy": "same-origin",
  "x-content-type-options": "nosniff",
};

export const BILLING_STYLESHEET_PATH = "/assets/billing.css";

const day = (seconds: number | null) => (seconds === null ? "—" : new Date(seconds * 1000).toISOString().slice(0, 10));

const STATUS_TEXT: Record<InvoiceView["status"], string> = {
  draft: "Draft",
  open: "Open: payment due",
  paid: "Paid",
  void: "Void",
  uncollectible: "Uncollectible",
};

function InvoicePage(props: { invoice: InvoiceView }) {
  const i = props.invoice;
  const money = (cents: number) => formatMoney(cents, i.currency);
  return (
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>{`Invoice ${i.number ?? i.id} · Core`}</title>
        <link rel="stylesheet" href={BILLING_STYLESHEET_PATH} />
      </head>
      <body>
        <main class="invoice">
          <h1>Invoice {i.number}</h1>
          <dl class="facts">
            <dt>Status</dt>
            <dd>{STATUS_TEXT[i.status]}</dd>
            <dt>Billed to</dt>
            <dd>
              {i.customerSnapshot.name ? `${i.customerSnapshot.name} · ` : ""}
              {i.customerSnapshot.email}
            </dd>
            <dt>Period</dt>
            <dd>
              {day(i.periodStart)} to {day(i.periodEnd)}
            </dd>
            <dt>Issued</dt>
            <dd>{day(i.finalizedAt)}</dd>
            {i.paidAt ? (
              <>
                <dt>Paid</dt>
                <dd>{day(i.paidAt)}</dd>
              </>
            ) : null}
          </dl>
          <table>
            <caption>Lines</caption>
            <thead>
              <tr>
                <th scope="col">Description</th>
                <th scope="col">Period</th>
                <th scope="col" class="amount">
                  Amount
                </th>
              </tr>
            </thead>
            <tbody>
              {i.lines.map((line) => (
                <tr>
                  <td>
                    {line.description}
                    {line.meter ? <span class="muted"> ({line.quantity} × {line.unitAmountCents}¢)</span> : null}
                  </td>
                  <td>{line.periodStart ? `${day(line.periodStart)} to ${day(line.periodEnd)}` : ""}</td>
                  <td class="amount">{money(line.amountCents)}</td>
                </tr>
              ))}
            </tbody>
            <tfoot>
              <tr>
                <th scope="row" colspan={2}>
                  Subtotal
                </th>
                <td class="amount">{money(i.subtotalCents)}</td>
              </tr>
              <tr>
                <th scope="row" colspan={2}>
                  Tax
                </th>
                <td class="amount">{money(i.taxCents)}</td>
              </tr>
              <tr>
                <th scope="row" colspan={2}>
                  Total
                </th>
                <td class="amount">{money(i.totalCents)}</td>
              </tr>
              {i.creditAppliedCents > 0 ? (
                <tr>
                  <th scope="row" colspan={2}>
                    Credit applied
                  </th>
                  <td class="amount">{money(-i.creditAppliedCents)}</td>
                </tr>
              ) : null}
              <tr>
                <th scope="row" colspan={2}>
                  Amount due
                </th>
                <td class="amount">{money(i.amountDueCents)}</td>
              </tr>
              <tr>
                <th scope="row" colspan={2}>
                  Amount paid
                </th>
                <td class="amount">{money(i.amountPaidCents)}</td>
              </tr>
            </tfoot>
          </table>
        </main>
      </body>
    </html>
  );
}

/** `GET /invoices/{id}/html` (DESIGN §6.4): the invoice as a printable page. */
export async function renderInvoicePage(c: Context, invoice: InvoiceView) {
  for (const [name, value] of Object.entries(PAGE_HEADERS)) c.header(name, value);
  return c.html(html`<!DOCTYPE html>${<InvoicePage invoice={invoice} />}`, 200);
}
