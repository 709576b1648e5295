/**
 * Billing's one stylesheet (the invoice page and the portal): system fonts, no external assets,
 * WCAG 2.2 AA contrast, one column down to 320 px, and a print layout without the page's chrome.
 */
export const BILLING_STYLESHEET = `
*, *::before, *::after { box-sizing: border-box; }
body { margin: 0; background: #f3f4f6; color: #111827; font: 16px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, Arial, sans-serif; }
a { color: #1d4ed8; }
:focus-visible { outline: 3px solid #1d4ed8; outline-offset: 2px; }
main { max-width: 44rem; margin: 1.5rem auto; padding: 0 1rem; }
main.wide { max-width: 54rem; }
h1 { font-size: 1.5rem; margin: 0 0 1rem; }
h2 { font-size: 1.125rem; margin: 0 0 .75rem; }
.card, .invoice { background: #fff; border: 1px solid #d1d5db; border-radius: 8px; padding: 1.25rem; margin-bottom: 1.25rem; }
.muted { color: #4b5563; }
.parties { display: grid; grid-template-columns: repeat(auto-fit, minmax(14rem, 1fr)); gap: 1rem; margin: 0 0 1rem; }
address { font-style: normal; overflow-wrap: anywhere; }
.facts { display: grid; grid-template-columns: max-content 1fr; gap: .25rem 1rem; margin: 0 0 1rem; }
.facts dt { font-weight: 600; }
.facts dd { margin: 0; overflow-wrap: anywhere; }
table { width: 100%; border-collapse: collapse; margin: 0 0 1rem; }
caption { text-align: left; font-weight: 600; padding-bottom: .5rem; }
th, td { text-align: left; padding: .5rem .25rem; border-bottom: 1px solid #e5e7eb; vertical-align: top; }
.amount { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
tfoot th { font-weight: 600; text-align: right; }
.alert { border-radius: 6px; padding: .75rem 1rem; margin-bottom: 1rem; border: 1px solid; }
.alert.error { background: #fef2f2; border-color: #b91c1c; color: #7f1d1d; }
.alert.success { background: #f0fdf4; border-color: #15803d; color: #14532d; }
.alert.info { background: #eff6ff; border-color: #1d4ed8; color: #1e3a8a; }
label { display: block; font-weight: 600; margin-bottom: .25rem; }
.field { margin-bottom: 1rem; }
select, input[type=text] { display: block; width: 100%; min-height: 44px; padding: .5rem .75rem; font: inherit; border: 1px solid #6b7280; border-radius: 6px; background: #fff; color: inherit; }
button { min-height: 44px; padding: .5rem 1rem; font: inherit; font-weight: 600; border-radius: 6px; border: 1px solid #1d4ed8; background: #1d4ed8; color: #fff; cursor: pointer; }
button.secondary { background: #fff; color: #1f2937; border-color: #6b7280; }
button.danger { background: #b91c1c; border-color: #b91c1c; }
.items { list-style: none; margin: 0 0 1rem; padding: 0; }
.items li { display: flex; flex-wrap: wrap; gap: .5rem; justify-content: space-between; align-items: center; padding: .5rem 0; border-bottom: 1px solid #e5e7eb; }
.items form { margin: 0; display: inline; }
.badge { display: inline-block; font-size: .75rem; font-weight: 700; padding: 0 .5rem; border-radius: 999px; background: #dbeafe; color: #1e3a8a; }
.badge.failing { background: #fef3c7; color: #78350f; }
.alert.warning { background: #fffbeb; border-color: #b45309; color: #78350f; }
.alert h2 { font-size: 1rem; margin: 0 0 .5rem; }
.alert p { margin: 0 0 .5rem; }
.alert p:last-child, .alert form:last-child { margin-bottom: 0; }
.alert a { color: inherit; font-weight: 600; }
form.pay { display: flex; flex-wrap: wrap; gap: .5rem; align-items: end; margin: 0; }
.field.inline { margin: 0; display: flex; gap: .5rem; align-items: center; }
.field.inline label { margin: 0; }
.field.inline select { width: auto; }
.visually-hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; }
.table-wrap { overflow-x: auto; position: relative; }
table.invoices { font-variant-numeric: tabular-nums; }
table.invoices td, table.invoices th { vertical-align: middle; }
table.invoices .amount, table.invoices .date, table.invoices .status, table.invoices .number { white-space: nowrap; }
table.invoices td.actions { text-align: right; }
.status { display: inline-block; font-size: .875rem; font-weight: 600; padding: 0 .5rem; border-radius: 999px; background: #f3f4f6; color: #1f2937; }
.status.paid { background: #dcfce7; color: #14532d; }
.status.open { background: #dbeafe; color: #1e3a8a; }
.status.uncollectible { background: #fee2e2; color: #7f1d1d; }
@media (max-width: 40rem) {
  table.invoices thead { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); }
  table.invoices tr { display: grid; grid-template-columns: max-content 1fr; gap: .25rem 1rem; padding: .5rem 0; border-bottom: 1px solid #e5e7eb; }
  table.invoices td { display: contents; border: 0; }
  table.invoices td > * { grid-column: 2; justify-self: start; }
  table.invoices td::before { content: attr(data-label); font-weight: 600; grid-column: 1; }
  table.invoices td.amount { text-align: left; }
  table.invoices td.actions::before { content: none; }
  table.invoices td.actions > * { grid-column: 1 / -1; }
}
.usage-chart { margin: 1rem 0 0; }
.usage-chart svg { display: block; width: 100%; height: auto; background: #f9fafb; border: 1px solid #e5e7eb; border-radius: 6px; }
.usage-chart .axis { stroke: #6b7280; stroke-width: 1; }
.usage-chart .within { fill: #1d4ed8; }
.usage-chart .beyond { fill: #b45309; }
.usage-chart .included { stroke: #111827; stroke-width: 1.5; stroke-dasharray: 6 4; }
.usage-chart text { fill: #111827; font-size: 12px; }
.usage-chart figcaption { margin: .5rem 0; }
.usage-chart details { margin-bottom: .5rem; }
.usage-chart summary { cursor: pointer; color: #1d4ed8; }
@media print { body { background: #fff; } main { margin: 0; max-width: none; } .invoice { border: 0; padding: 0; } }
`;
