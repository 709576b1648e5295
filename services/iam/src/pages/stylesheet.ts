/**
 * The one stylesheet of the pages: system fonts, no external assets. Colours keep WCAG 2.2 AA
 * contrast (text ≥ 4.5:1, controls ≥ 3:1), controls are at least 44 px high, focus is always
 * visible, and one column fits a 320 px wide screen.
 */
export const STYLESHEET = `
*, *::before, *::after { box-sizing: border-box; }
html { -webkit-text-size-adjust: 100%; }
body {
  margin: 0; background: #f3f4f6; color: #111827;
  font: 16px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
}
a { color: #1d4ed8; text-underline-offset: 2px; }
a:hover { color: #1e3a8a; }
:focus-visible { outline: 3px solid #1d4ed8; outline-offset: 2px; }
.skip { position: absolute; left: -9999px; top: 0; background: #fff; padding: .5rem 1rem; }
.skip:focus { left: .5rem; top: .5rem; z-index: 1; }
.top {
  display: flex; flex-wrap: wrap; gap: .5rem 1rem; align-items: center; justify-content: space-between;
  padding: .75rem 1rem; background: #111827; color: #f9fafb;
}
.top a, .top .who { color: #f9fafb; }
.brand { font-weight: 700; font-size: 1.125rem; text-decoration: none; }
.top nav { display: flex; flex-wrap: wrap; gap: .25rem 1rem; align-items: center; }
.top form { margin: 0; }
.top button { min-height: 36px; padding: .25rem .75rem; background: transparent; color: #f9fafb; border: 1px solid #9ca3af; }
.top button:hover { background: #374151; }
.top :focus-visible { outline-color: #93c5fd; }
main { max-width: 36rem; margin: 1.5rem auto; padding: 0 1rem; }
.card { background: #fff; border: 1px solid #d1d5db; border-radius: 8px; padding: 1.25rem; margin-bottom: 1.25rem; }
h1 { font-size: 1.5rem; line-height: 1.25; margin: 0 0 1rem; }
h2 { font-size: 1.125rem; margin: 0 0 .75rem; }
p { margin: 0 0 1rem; }
.muted { color: #4b5563; }
.lead { font-size: 1.0625rem; }
label { display: block; font-weight: 600; margin-bottom: .25rem; }
.field { margin-bottom: 1rem; }
.hint { display: block; color: #4b5563; font-size: .875rem; margin-top: .25rem; }
input[type=text], input[type=email], input[type=password], select {
  display: block; width: 100%; min-height: 44px; padding: .5rem .75rem; font: inherit; color: inherit;
  background: #fff; border: 1px solid #6b7280; border-radius: 6px;
}
input[aria-invalid=true] { border-color: #b91c1c; border-width: 2px; }
.field-error { color: #991b1b; font-size: .875rem; margin: .25rem 0 0; font-weight: 600; }
button {
  min-height: 44px; padding: .5rem 1.25rem; font: inherit; font-weight: 600; cursor: pointer;
  border-radius: 6px; border: 1px solid #1d4ed8; background: #1d4ed8; color: #fff;
}
button:hover { background: #1e40af; }
button.secondary { background: #fff; color: #111827; border-color: #6b7280; }
button.secondary:hover { background: #f3f4f6; }
button.danger { background: #b91c1c; border-color: #b91c1c; color: #fff; }
button.danger:hover { background: #991b1b; }
button.small { min-height: 36px; padding: .25rem .75rem; font-size: .875rem; }
.actions { display: flex; flex-wrap: wrap; gap: .75rem; margin-top: 1rem; }
.actions form { margin: 0; }
.alert { border-radius: 6px; padding: .75rem 1rem; margin-bottom: 1rem; border: 1px solid; }
.alert.error { background: #fef2f2; border-color: #fca5a5; color: #7f1d1d; }
.alert.success { background: #f0fdf4; border-color: #86efac; color: #14532d; }
.alert.info { background: #eff6ff; border-color: #93c5fd; color: #1e3a8a; }
.code { font: 700 1.75rem/1.2 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; letter-spacing: .1em; }
code, .secret { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
.secret { display: block; padding: .5rem; background: #f9fafb; border: 1px solid #d1d5db; border-radius: 4px; word-break: break-all; user-select: all; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: .25rem 1rem; margin: 0 0 1rem; }
dl.facts dt { font-weight: 600; }
dl.facts dd { margin: 0; overflow-wrap: anywhere; }
ul.items { list-style: none; margin: 0 0 1rem; padding: 0; }
ul.items li { display: flex; flex-wrap: wrap; gap: .5rem 1rem; align-items: center; justify-content: space-between; padding: .75rem 0; border-top: 1px solid #e5e7eb; }
ul.items li:first-child { border-top: 0; }
.item-text { min-width: 0; overflow-wrap: anywhere; }
.badge { display: inline-block; font-size: .75rem; font-weight: 700; padding: 0 .5rem; border-radius: 999px; background: #dbeafe; color: #1e3a8a; }
.badge.warn { background: #fef3c7; color: #78350f; }
.divider { border: 0; border-top: 1px solid #e5e7eb; margin: 1.25rem 0; }
.qr svg { display: block; width: 100%; max-width: 13rem; height: auto; background: #fff; }
ul.backup-codes { list-style: none; padding: 0; display: grid; grid-template-columns: repeat(auto-fill, minmax(8rem, 1fr)); gap: .25rem .75rem; }
@media (max-width: 30rem) {
  main { margin-top: 1rem; padding: 0 .5rem; }
  .card { padding: 1rem; }
  .actions button { flex: 1 1 auto; }
  dl.facts { grid-template-columns: 1fr; }
  dl.facts dd { margin-bottom: .5rem; }
}
`;
