import type { Context } from "hono";
import { html } from "hono/html";
import { invoicePdf } from "../pdf.js";
import { invoiceDocument, type InvoiceView } from "./invoice-document.js";

/** Billing's pages: never cached, never framed, no script, forms only to ourselves (as IAM's). */
export const PAGE_HEADERS: Record<string, string> = {
  "cache-control": "no-store",
  "content-security-policy": "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  "x-frame-options": "DENY",
  "referrer-policy": "same-origin",
  "x-content-type-options": "nosniff",
};

export const BILLING_STYLESHEET_PATH = "/assets/billing.css";

function InvoicePage(props: { invoice: InvoiceView }) {
  const d = invoiceDocument(props.invoice);
  return (
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>{`${d.title} · Core`}</title>
        <link rel="stylesheet" href={BILLING_STYLESHEET_PATH} />
      </head>
      <body>
        <main class="invoice">
          <h1>{d.title}</h1>
          <div class="parties">
            {d.seller.length > 0 ? (
              <section aria-labelledby="seller">
                <h2 id="seller">From</h2>
                <address>
                  {d.seller.map((line) => (
                    <>
                      {line}
                      <br />
                    </>
                  ))}
                </address>
              </section>
            ) : null}
            <section aria-labelledby="buyer">
              <h2 id="buyer">Billed to</h2>
              <address>
                {d.buyer.map((line) => (
                  <>
                    {line}
                    <br />
                  </>
                ))}
              </address>
            </section>
          </div>
          <dl class="facts">
            {d.facts.map(([label, value]) => (
              <>
                <dt>{label}</dt>
                <dd>{value}</dd>
              </>
            ))}
          </dl>
          <table>
            <caption>Lines</caption>
            <thead>
              <tr>
                <th scope="col">{d.columns[0]}</th>
                {d.columns.slice(1).map((name) => (
                  <th scope="col" class="amount">
                    {name}
                  </th>
                ))}
              </tr>
            </thead>
            <tbody>
              {d.lines.map((line) => (
                <tr>
                  <td>
                    {line.description}
                    {line.detail ? <span class="muted"> ({line.detail})</span> : null}
                  </td>
                  <td class="amount">{line.quantity}</td>
                  <td class="amount">{line.unitPrice}</td>
                  <td class="amount">{line.taxRate}</td>
                  <td class="amount">{line.amount}</td>
                </tr>
              ))}
            </tbody>
            <tfoot>
              {d.totals.map(([label, value]) => (
                <tr>
                  <th scope="row" colspan={4}>
                    {label}
                  </th>
                  <td class="amount">{value}</td>
                </tr>
              ))}
            </tfoot>
          </table>
          {d.notes.map((note) => (
            <p class="note">{note}</p>
          ))}
        </main>
      </body>
    </html>
  );
}

/** `GET /invoices/{id}/html` (DESIGN §6.4, §6.11): the invoice as a printable page, the same content as its PDF. */
export async function renderInvoicePage(c: Context, invoice: InvoiceView) {
  for (const [name, value] of Object.entries(PAGE_HEADERS)) c.header(name, value);
  return c.html(html`<!DOCTYPE html>${<InvoicePage invoice={invoice} />}`, 200);
}

/** The invoice as a PDF (`GET /invoices/{id}/pdf` and the portal's link): the page's headers but its CSP, which browsers' PDF viewers may not run under. */
export async function renderInvoicePdf(c: Context, invoice: InvoiceView) {
  const pdf = await invoicePdf(invoice);
  const name = (invoice.number ?? invoice.id).replace(/[^A-Za-z0-9-]/g, "");
  const { "content-security-policy": _csp, ...headers } = PAGE_HEADERS;
  return c.body(new Uint8Array(pdf), 200, { ...headers, "content-type": "application/pdf", "content-disposition": `inline; filename="invoice-${name}.pdf"` });
}
