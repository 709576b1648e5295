import DecimalJs from "decimal.js";
import { formatQuantity } from "../money.js";

/** Exact sums of usage (up to 12 decimal places on large counts): more digits than decimal.js's default 20. */
const Decimal = DecimalJs.clone({ precision: 80, toExpNeg: -100, toExpPos: 100 });
type Decimal = InstanceType<typeof Decimal>;

/**
 * The portal's usage picture (DESIGN §6.1, §6.5): one meter's usage in the current period, a bar per
 * UTC day, against what the plan includes. Server-rendered inline SVG, no script. A bar is the usage
 * so far at the end of its day (the running total of the daily rollups), so it meets the included
 * line on the day the allowance is used up; the part above the line is drawn in another colour.
 * Each bar's title gives the day's own usage and the total so far; the caption says it in words,
 * and a table (in a `<details>`, which needs no script) lists every day, for screen readers and print.
 *
 * Quantities stay exact decimals; only the drawing's geometry becomes numbers, rounded to 0.01 of
 * the viewBox.
 */

/** The drawing's coordinates (the viewBox); CSS scales it to the column's width. */
const WIDTH = 640;
const HEIGHT = 150;
const TOP = 12;
const BOTTOM = 22;
const PLOT = HEIGHT - TOP - BOTTOM;

const DAY_MS = 86_400_000;

export interface UsageChartProps {
  meter: string;
  /** what the plan includes this period (decimal string) */
  included: string;
  /** the period's first and last UTC days (`2026-11-27`) */
  first: string;
  last: string;
  /** the usage of each day from `first` to today, in order (decimal strings) */
  days: { date: string; quantity: string }[];
}

const label = (meter: string) => meter.replaceAll("_", " ");

/** `a / b` of the plot's height, from exact decimals, as a drawing coordinate. */
const scaled = (value: Decimal, max: Decimal) => value.dividedBy(max).times(PLOT).toDecimalPlaces(2).toNumber();

const percentOf = (part: Decimal, whole: Decimal) => (whole.isZero() ? null : part.dividedBy(whole).times(100).toDecimalPlaces(1).toFixed());

export function UsageChart(props: UsageChartProps) {
  const periodDays: string[] = [];
  for (let t = Date.parse(`${props.first}T00:00:00Z`); t <= Date.parse(`${props.last}T00:00:00Z`); t += DAY_MS) periodDays.push(new Date(t).toISOString().slice(0, 10));
  const count = Math.max(periodDays.length, 1);
  let total = new Decimal(0);
  const bars = props.days.map((d) => {
    total = total.plus(d.quantity);
    return { date: d.date, quantity: new Decimal(d.quantity), soFar: total };
  });
  const included = new Decimal(props.included);
  // headroom above the larger of the allowance and the usage, so the line and the tallest bar both show
  const top = Decimal.max(included, total).times(1.1);
  const max = top.isZero() ? new Decimal(1) : top;
  const slot = WIDTH / count;
  const barWidth = Math.max(Math.round(slot * 0.7 * 100) / 100, 1);
  const base = TOP + PLOT;
  const lineY = Math.round((base - scaled(included, max)) * 100) / 100;
  const id = `usage-${props.meter}`;
  const busiest = bars.reduce<(typeof bars)[number] | null>((best, bar) => (best === null || bar.quantity.gt(best.quantity) ? bar : best), null);
  const percent = percentOf(total, included);
  const over = total.gt(included);
  const summary =
    `${label(props.meter)}: ${formatQuantity(total.toFixed())} used this period of ${formatQuantity(props.included)} included` +
    (percent === null ? "" : ` (${percent} %)`) +
    (over ? `, ${formatQuantity(total.minus(included).toFixed())} beyond it` : "") +
    (busiest && busiest.quantity.gt(0) ? `; the busiest day was ${busiest.date} with ${formatQuantity(busiest.quantity.toFixed())}` : "") +
    ".";
  return (
    <figure class="usage-chart">
      <svg viewBox={`0 0 ${WIDTH} ${HEIGHT}`} role="img" aria-labelledby={`${id}-title ${id}-desc`} xmlns="http://www.w3.org/2000/svg">
        <title id={`${id}-title`}>{`${label(props.meter)}, usage so far by UTC day, ${props.first} to ${props.last}`}</title>
        <desc id={`${id}-desc`}>{summary}</desc>
        <line class="axis" x1="0" y1={base} x2={WIDTH} y2={base} />
        {bars.map((bar) => {
          const i = periodDays.indexOf(bar.date);
          const x = Math.round((i * slot + (slot - barWidth) / 2) * 100) / 100;
          const height = scaled(bar.soFar, max);
          const within = scaled(Decimal.min(bar.soFar, included), max);
          return (
            <g class="bar">
              <title>{`${bar.date}: ${formatQuantity(bar.quantity.toFixed())} that day, ${formatQuantity(bar.soFar.toFixed())} so far`}</title>
              {within > 0 ? <rect class="within" x={x} y={Math.round((base - within) * 100) / 100} width={barWidth} height={within} /> : null}
              {height > within ? <rect class="beyond" x={x} y={Math.round((base - height) * 100) / 100} width={barWidth} height={Math.round((height - within) * 100) / 100} /> : null}
            </g>
          );
        })}
        <line class="included" x1="0" y1={lineY} x2={WIDTH} y2={lineY} />
        <text x={WIDTH - 4} y={Math.max(lineY - 4, 10)} text-anchor="end">{`${formatQuantity(props.included)} included`}</text>
        <text x="0" y={HEIGHT - 6}>{props.first}</text>
        <text x={WIDTH} y={HEIGHT - 6} text-anchor="end">
          {props.last}
        </text>
      </svg>
      <figcaption>{summary}</figcaption>
      <details>
        <summary>Day by day ({label(props.meter)})</summary>
        <table>
          <thead>
            <tr>
              <th scope="col">Day (UTC)</th>
              <th scope="col" class="amount">
                That day
              </th>
              <th scope="col" class="amount">
                So far
              </th>
            </tr>
          </thead>
          <tbody>
            {bars.map((bar) => (
              <tr>
                <td>{bar.date}</td>
                <td class="amount">{formatQuantity(bar.quantity.toFixed())}</td>
                <td class="amount">{formatQuantity(bar.soFar.toFixed())}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </details>
    </figure>
  );
}
