import { readFileSync } from "node:fs";
import { z } from "@hono/zod-openapi";
import { ConfigError } from "@core/kit";

/** The paid tiers of spec §2.7, and `free`, where every platform starts (DESIGN §6.3). */
export const TIERS = ["free", "starter", "growth", "scale"] as const;
export type Tier = (typeof TIERS)[number];
export const PAID_TIERS = ["starter", "growth", "scale"] as const;
export type PaidTier = (typeof PAID_TIERS)[number];

/** The meters of DESIGN §6.2. */
export const METERS = ["api_requests", "compute_minutes", "storage_gb_hours"] as const;

const DECIMAL = /^(0|[1-9][0-9]{0,19})(\.[0-9]{1,12})?$/;
const Quantity = z.string().regex(DECIMAL, "a decimal string such as \"1000\" or \"0.5\"");

const PlanSchema = z.object({
  id: z.string().min(1).max(64),
  tier: z.enum(TIERS),
  name: z.string().min(1).max(64),
  currency: z.string().regex(/^[a-z]{3}$/, "a lower-case ISO 4217 code"),
  priceCents: z.number().int().min(0).max(100_000_000),
  interval: z.literal("month"),
  priceId: z.string().min(1).max(64),
  included: z.record(z.enum(METERS), Quantity),
  overageUnitCents: z.record(z.enum(METERS), Quantity),
});

export type Plan = z.infer<typeof PlanSchema>;

const plan = (tier: Tier, name: string, priceCents: number, included: [string, string, string], overage: [string, string, string]): Plan => ({
  id: `plan_${tier}`,
  tier,
  name,
  currency: "usd",
  priceCents,
  interval: "month",
  priceId: `price_${tier}_monthly`,
  included: { api_requests: included[0], compute_minutes: included[1], storage_gb_hours: included[2] },
  overageUnitCents: { api_requests: overage[0], compute_minutes: overage[1], storage_gb_hours: overage[2] },
});

/**
 * The default catalogue (DESIGN §6.2): $0, $29, $99, $499 a month, with growing included usage.
 * Unit prices are in cents and may be fractions of one ("0.004" is $0.04 per thousand requests).
 * Free usage beyond what is included is not billed: a free platform has no payment method.
 */
export const DEFAULT_PLANS: Plan[] = [
  plan("free", "Free", 0, ["10000", "100", "100"], ["0", "0", "0"]),
  plan("starter", "Starter", 2900, ["100000", "1000", "1000"], ["0.004", "0.5", "0.02"]),
  plan("growth", "Growth", 9900, ["1000000", "10000", "10000"], ["0.003", "0.4", "0.015"]),
  plan("scale", "Scale", 49900, ["10000000", "100000", "100000"], ["0.002", "0.3", "0.01"]),
];

/** The price list: one plan per tier, in one currency, prices rising with the tier. */
export class Catalogue {
  private readonly byTier: Map<Tier, Plan>;

  constructor(readonly plans: Plan[]) {
    this.byTier = new Map(plans.map((p) => [p.tier, p]));
  }

  plan(tier: Tier): Plan {
    return this.byTier.get(tier)!;
  }

  byPriceId(priceId: string): Plan | undefined {
    return this.plans.find((p) => p.priceId === priceId);
  }

  byId(planId: string): Plan | undefined {
    return this.plans.find((p) => p.id === planId);
  }

  get currency(): string {
    return this.plans[0]!.currency;
  }

  /** An upgrade costs more per period than the tier it leaves (DESIGN §6.3). */
  isUpgrade(from: Tier, to: Tier): boolean {
    return this.plan(to).priceCents > this.plan(from).priceCents;
  }
}

const CatalogueSchema = z
  .array(PlanSchema)
  .length(TIERS.length, `name exactly the ${TIERS.length} tiers ${TIERS.join(", ")}`)
  .superRefine((plans, check) => {
    const issue = (message: string) => check.addIssue({ code: "custom", message });
    for (const tier of TIERS) if (!plans.some((p) => p.tier === tier)) issue(`no plan for the tier "${tier}"`);
    for (const key of ["id", "priceId"] as const) {
      if (new Set(plans.map((p) => p[key])).size !== plans.length) issue(`every plan needs its own ${key}`);
    }
    if (new Set(plans.map((p) => p.currency)).size > 1) issue("all plans must share one currency");
    const free = plans.find((p) => p.tier === "free");
    if (free && free.priceCents !== 0) issue("the free plan must cost 0");
    const prices = TIERS.map((t) => plans.find((p) => p.tier === t)?.priceCents ?? 0);
    if (prices.some((price, i) => i > 0 && price <= prices[i - 1]!)) issue("prices must rise from free to starter, growth and scale");
  });

/**
 * The catalogue: the defaults, or the JSON file `CORE_BILLING_PLANS` names, validated at start with
 * a message that says what is wrong (DESIGN §6.2). A new catalogue never rewrites past invoices:
 * invoices keep their own lines.
 */
export function loadCatalogue(file: string | undefined): Catalogue {
  if (!file) return new Catalogue(DEFAULT_PLANS);
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(file, "utf8"));
  } catch (err) {
    throw new ConfigError(`CORE_BILLING_PLANS: cannot read ${file} as JSON (${(err as Error).message})`);
  }
  const parsed = CatalogueSchema.safeParse(raw);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => (i.path.length ? `${i.path.join(".")}: ${i.message}` : i.message));
    throw new ConfigError(`CORE_BILLING_PLANS (${file}): ${problems.join("; ")}`);
  }
  return new Catalogue(parsed.data);
}
