import type { Context } from "hono";
import { html } from "hono/html";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { BUYER_LIMITS } from "../customers.js";
import { TAX_ID_FORMATS } from "../tax.js";
import { BILLING_STYLESHEET_PATH, PAGE_HEADERS } from "./invoice.js";

/** The form's values as the person sees them: the customer's, or what they sent back with an error. */
export interface DetailsValues {
  email: string;
  name: string;
  line1: string;
  line2: string;
  city: string;
  postalCode: string;
  state: string;
  country: string;
  taxIds: { type: string; value: string }[];
  /** none or reverse, the buyer's choice; null for a customer the seller made exempt (the form offers no choice then) */
  taxExempt: string | null;
  /** the box "ask for tax exemption" and its note */
  exemptionAsked: boolean;
  exemptionNote: string;
  /** when the pending request was made, if one is */
  exemptionRequestedAt: Date | null;
}

export interface DetailsPage {
  /** `/portal/{id}` */
  base: string;
  values: DetailsValues;
  alert: { kind: "success" | "error"; text: string } | null;
}

// exempt is not a choice: the seller decides it, on the request below (docs/vault/concepts/invoices-and-tax.md)
const TREATMENTS: [string, string][] = [
  ["none", "Taxed at my country's rate"],
  ["reverse", "EU business in another EU country: reverse charge (needs your EU VAT id)"],
];

const day = (d: Date) => d.toISOString().slice(0, 10);

/** How tax applies: the buyer's choice of treatment and a request for exemption, or the seller's exemption. */
function TaxTreatment(props: { values: DetailsValues }) {
  const v = props.values;
  if (v.taxExempt === null) {
    return (
      <div class="field">
        <p>
          <strong>Tax:</strong> your account is tax exempt: Core made it so. Write to us to change it.
        </p>
      </div>
    );
  }
  return (
    <fieldset>
      <legend>Tax</legend>
      <div class="field">
        <label for="taxExempt">How tax applies</label>
        <select id="taxExempt" name="taxExempt">
          {TREATMENTS.map(([value, label]) => (
            <option value={value} selected={v.taxExempt === value}>
              {label}
            </option>
          ))}
        </select>
      </div>
      <div class="field">
        <label>
          <input type="checkbox" name="taxExemptionRequested" checked={v.exemptionAsked} /> Ask Core to make this account tax exempt (a charity, a public body …)
        </label>
        {v.exemptionRequestedAt ? <p class="muted">You asked for it on {day(v.exemptionRequestedAt)}: Core answers by changing how tax applies. Untick the box to withdraw it.</p> : null}
      </div>
      <Field id="taxExemptionNote" label="Why (for example your charity's register number)" value={v.exemptionNote} max={BUYER_LIMITS.taxExemptionNote} />
    </fieldset>
  );
}

function Field(props: { id: string; label: string; value: string; max: number; autocomplete?: string; hint?: string; required?: boolean }) {
  return (
    <div class="field">
      <label for={props.id}>{props.label}</label>
      {props.hint ? (
        <p class="muted" id={`${props.id}-hint`}>
          {props.hint}
        </p>
      ) : null}
      <input
        type="text"
        id={props.id}
        name={props.id}
        value={props.value}
        maxlength={props.max}
        autocomplete={props.autocomplete}
        aria-describedby={props.hint ? `${props.id}-hint` : undefined}
        required={props.required}
      />
    </div>
  );
}

/**
 * The portal's billing details form (DESIGN §6.11): the name, address and tax ids invoices name the
 * buyer by, how tax applies, and a request to be made tax exempt (the seller grants it). Server-
 * rendered, no script; it posts to itself and comes back here (POST/redirect/GET). Five rows of tax
 * ids, Stripe's limit shown on invoices.
 */
function BillingDetailsPage(props: DetailsPage) {
  const v = props.values;
  const rows = [...v.taxIds, ...Array.from({ length: Math.max(BUYER_LIMITS.taxIds - v.taxIds.length, 0) }, () => ({ type: "", value: "" }))].slice(0, BUYER_LIMITS.taxIds);
  return (
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>Billing details · Core</title>
        <link rel="stylesheet" href={BILLING_STYLESHEET_PATH} />
      </head>
      <body>
        <main>
          <p>
            <a href={props.base}>← Back to billing</a>
          </p>
          <h1>Billing details</h1>
          <p class="muted">Your invoices name you with these details from the next invoice on. Invoices already issued stay as they are.</p>
          {props.alert ? (
            <div class={`alert ${props.alert.kind}`} role={props.alert.kind === "error" ? "alert" : "status"}>
              {props.alert.text}
            </div>
          ) : null}
          <form method="post" action={`${props.base}/details`} class="card">
            <Field id="name" label="Name or company" value={v.name} max={BUYER_LIMITS.name} autocomplete="organization" />
            <Field id="email" label="Billing email" value={v.email} max={320} autocomplete="email" required />
            <fieldset>
              <legend>Address</legend>
              <Field id="line1" label="Address line 1" value={v.line1} max={BUYER_LIMITS.line} autocomplete="address-line1" />
              <Field id="line2" label="Address line 2 (optional)" value={v.line2} max={BUYER_LIMITS.line} autocomplete="address-line2" />
              <Field id="postalCode" label="Postal code" value={v.postalCode} max={BUYER_LIMITS.postalCode} autocomplete="postal-code" />
              <Field id="city" label="City" value={v.city} max={BUYER_LIMITS.city} autocomplete="address-level2" />
              <Field id="state" label="State or region code (optional)" value={v.state} max={3} autocomplete="address-level1" hint="For example CA for California: some regions have their own tax rate." />
              <Field id="country" label="Country code" value={v.country} max={2} autocomplete="country" hint="Two letters: DE, FR, US …" />
            </fieldset>
            <fieldset>
              <legend>Tax ids</legend>
              {rows.map((row, i) => (
                <div class="field">
                  <label for={`taxIdType${i}`}>Tax id {i + 1}: type</label>
                  <select id={`taxIdType${i}`} name={`taxIdType${i}`}>
                    <option value="" selected={row.type === ""}>
                      None
                    </option>
                    {Object.entries(TAX_ID_FORMATS).map(([type, format]) => (
                      <option value={type} selected={row.type === type}>
                        {`${type} (${format.example})`}
                      </option>
                    ))}
                  </select>
                  <label for={`taxIdValue${i}`}>Tax id {i + 1}: number</label>
                  <input type="text" id={`taxIdValue${i}`} name={`taxIdValue${i}`} value={row.value} maxlength={BUYER_LIMITS.taxIdValue} />
                </div>
              ))}
            </fieldset>
            <TaxTreatment values={v} />
            <button type="submit">Save billing details</button>
          </form>
        </main>
      </body>
    </html>
  );
}

export function renderBillingDetails(c: Context, page: DetailsPage, status: ContentfulStatusCode = 200) {
  for (const [name, value] of Object.entries(PAGE_HEADERS)) c.header(name, value);
  return c.html(html`<!DOCTYPE html>${<BillingDetailsPage {...page} />}`, status);
}
