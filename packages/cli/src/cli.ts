import { parseArgs } from "node:util";
import { BillingClient } from "./billing-client.js";
import { browserOpener } from "./browser.js";
import { billing, DEFAULT_CARD } from "./commands/billing.js";
import { login } from "./commands/login.js";
import { logout } from "./commands/logout.js";
import { org } from "./commands/org.js";
import { stacks } from "./commands/stacks.js";
import { status } from "./commands/status.js";
import { token } from "./commands/token.js";
import { whoami } from "./commands/whoami.js";
import type { Context, Outcome } from "./context.js";
import { CliFailure, failures } from "./failures.js";
import { IamClient } from "./iam-client.js";
import { readSettings } from "./settings.js";
import { StackRegistryClient } from "./stack-registry-client.js";

/** Set by the build (scripts/build.mjs) from packages/cli/package.json. */
declare const CORE_CLI_VERSION: string | undefined;
export const VERSION = typeof CORE_CLI_VERSION === "string" ? CORE_CLI_VERSION : "0.0.0-dev";

type Values = { [name: string]: string | boolean | undefined };

interface Command {
  summary: string;
  usage: string;
  options: Record<string, { type: "string" | "boolean"; short?: string }>;
  /** names of the positional arguments, in order; a trailing "?" marks an optional one */
  args?: string[];
  run(ctx: Context, values: Values, args: string[]): Promise<Outcome>;
}

/** A command with commands of its own: `core stacks list`; a group may hold groups (`core billing cards add`). */
interface Group {
  summary: string;
  usage: string;
  commands: Record<string, Command | Group>;
  /** what the group does alone (`core billing cards` lists them); without it a command is required */
  default?: Command;
}

const IAM_URL_OPTION = { "iam-url": { type: "string" as const } };

const STACKS_OPTIONS = { "registry-url": { type: "string" as const }, token: { type: "string" as const } };
const STACKS_OPTIONS_HELP = `--registry-url <url>  stack registry address; else CORE_STACK_REGISTRY_URL, else http://localhost:4300
--token <token>       this access token instead of CORE_TOKEN or the stored login (core login)`;
const stacksOptions = (v: Values) => ({ registryUrl: v["registry-url"] as string | undefined, token: v.token as string | undefined });
/** The texts of a template that `create` sets and `update` changes. */
const TEXT_OPTIONS = { "display-name": { type: "string" as const }, description: { type: "string" as const }, icon: { type: "string" as const } };
const textsOf = (v: Values) => ({
  displayName: v["display-name"] as string | undefined,
  description: v.description as string | undefined,
  icon: v.icon as string | undefined,
});

const STACKS: Group = {
  summary: "Stack templates and their versions in the stack registry: list, show, create, publish, deprecate",
  usage: `core stacks <command> [options]

  list                            the active stack templates
  show <name> [<version>]         one template and its latest version, or one version with its definition
  versions <name>                 every published version of a template
  create <name> --display-name <text> --description <text>
                                  create a template (needs the stacks:publish permission: operators)
  update <name> [--display-name <text>] [--description <text>] [--icon <url>] [--reactivate]
                                  change a template's texts or icon, or make a deprecated one active again
  publish <name> <version> --definition <file.json> --sdk <semver>
                                  publish a version (needs the stacks:publish permission: operators)
  deprecate <name> [<version>]    deprecate a template, or only one of its versions

Every stacks command takes:
${STACKS_OPTIONS_HELP}
--json                one JSON document on standard output`,
  commands: {
    list: {
      summary: "The active stack templates",
      usage: `core stacks list [--registry-url <url>] [--token <token>] [--json]

${STACKS_OPTIONS_HELP}`,
      options: STACKS_OPTIONS,
      run: (ctx, v) => stacks.list(ctx, stacksOptions(v)),
    },
    show: {
      summary: "One template and its latest version, or one version with its definition",
      usage: `core stacks show <name> [<version>] [--registry-url <url>] [--token <token>] [--json]

Without <version>: the template and its latest version.
With <version>: that version (deprecated ones too), with its stack definition.
${STACKS_OPTIONS_HELP}`,
      options: STACKS_OPTIONS,
      args: ["name", "version?"],
      run: (ctx, v, [name, version]) => stacks.show(ctx, stacksOptions(v), name!, version),
    },
    versions: {
      summary: "Every published version of a template",
      usage: `core stacks versions <name> [--registry-url <url>] [--token <token>] [--json]

${STACKS_OPTIONS_HELP}`,
      options: STACKS_OPTIONS,
      args: ["name"],
      run: (ctx, v, [name]) => stacks.versions(ctx, stacksOptions(v), name!),
    },
    create: {
      summary: "Create a template",
      usage: `core stacks create <name> --display-name <text> --description <text> [--icon <url>] [--domain <text>] [--registry-url <url>] [--token <token>] [--json]

<name>                 1-64 lower-case letters, digits and hyphens; it never changes
--display-name <text>  1-128 characters
--description <text>   1-1024 characters
--icon <url>           an icon address (optional)
--domain <text>        what the stack is for, such as web or data (optional; it never changes)
${STACKS_OPTIONS_HELP}`,
      options: { ...STACKS_OPTIONS, ...TEXT_OPTIONS, domain: { type: "string" } },
      args: ["name"],
      run: (ctx, v, [name]) => stacks.create(ctx, stacksOptions(v), { name: name!, ...textsOf(v), domain: v.domain as string | undefined }),
    },
    update: {
      summary: "Change a template's texts or icon, or reactivate it",
      usage: `core stacks update <name> [--display-name <text>] [--description <text>] [--icon <url>] [--reactivate] [--registry-url <url>] [--token <token>] [--json]

Only what is given changes; give at least one.
--display-name <text>  1-128 characters
--description <text>   1-1024 characters
--icon <url>           an icon address; --icon "" clears it
--reactivate           make a deprecated template active again: listed, and it takes new versions
${STACKS_OPTIONS_HELP}`,
      options: { ...STACKS_OPTIONS, ...TEXT_OPTIONS, reactivate: { type: "boolean" } },
      args: ["name"],
      run: (ctx, v, [name]) => stacks.update(ctx, stacksOptions(v), { name: name!, ...textsOf(v), reactivate: v.reactivate === true }),
    },
    publish: {
      summary: "Publish a version of a template",
      usage: `core stacks publish <name> <version> --definition <file.json> --sdk <semver> [--registry-url <url>] [--token <token>] [--json]

<version> and --sdk: MAJOR.MINOR.PATCH with an optional -suffix (1.2.0, 2.0.0-rc.1)
--definition <file>   the stack definition: a file holding one JSON object
--sdk <semver>        the core SDK version the stack is built for
${STACKS_OPTIONS_HELP}

Published versions never change: publishing the same version again is refused (VERSION_EXISTS).`,
      options: { ...STACKS_OPTIONS, definition: { type: "string" }, sdk: { type: "string" } },
      args: ["name", "version"],
      run: (ctx, v, [name, version]) =>
        stacks.publish(ctx, stacksOptions(v), { name: name!, version: version!, definition: v.definition as string | undefined, sdk: v.sdk as string | undefined }),
    },
    deprecate: {
      summary: "Deprecate a template, or one of its versions",
      usage: `core stacks deprecate <name> [<version>] [--registry-url <url>] [--token <token>] [--json]

Without <version>: the template leaves the list (PATCH status deprecated).
With <version>: that version is deprecated; it stays readable, and latest moves to the next highest.
${STACKS_OPTIONS_HELP}`,
      options: STACKS_OPTIONS,
      args: ["name", "version?"],
      run: (ctx, v, [name, version]) => stacks.deprecate(ctx, stacksOptions(v), name!, version),
    },
  },
};

const ORG: Group = {
  summary: "Your organizations: list them, and switch the one this login acts in",
  usage: `core org <command> [options]

  list                    every organization you are in, with your role; * marks the active one
  switch <slug>           act in another of your organizations from now on (this login only)

--json                one JSON document on standard output

A login acts in one organization at a time: its platform and permissions are that organization's.
The browser chooses its own on the account page. An API key acts in the organization it was made in.`,
  commands: {
    list: {
      summary: "Every organization you are in, with your role; * marks the active one",
      usage: "core org list [--json]",
      options: {},
      run: (ctx) => org.list(ctx),
    },
    switch: {
      summary: "Act in another of your organizations from now on (this login only)",
      usage: `core org switch <slug> [--json]

<slug>   the organization's slug, as core org list shows it`,
      options: {},
      args: ["slug"],
      run: (ctx, _v, [slug]) => org.switch(ctx, slug!),
    },
  },
};

const BILLING_OPTIONS = { "billing-url": { type: "string" as const }, token: { type: "string" as const }, platform: { type: "string" as const } };
const BILLING_OPTIONS_HELP = `--billing-url <url>   billing address; else CORE_BILLING_URL, else http://localhost:4200
--token <token>       this access token instead of CORE_TOKEN or the stored login (core login)
--platform <id>       the platform (operators); a tenant's own platform is the default`;
const billingOptions = (v: Values) => ({
  billingUrl: v["billing-url"] as string | undefined,
  token: v.token as string | undefined,
  platform: v.platform as string | undefined,
});

const YES_OPTION = { yes: { type: "boolean" as const, short: "y" } };
const YES_HELP = `--yes, -y             do not ask (scripts); without it core asks on the terminal, and changes
                      nothing when standard input is not one`;

const INVOICES: Group = {
  summary: "The platform's invoices: list them, show one, download its PDF",
  usage: `core billing invoices [show <id> | pdf <id> -o <file>] [options]

  (nothing)               the platform's invoices, newest first: --limit <n>, --cursor <cursor>
  show <id>               one invoice: its lines with quantity, unit price and amount, and the totals
  pdf <id> -o <file>      download its PDF; an existing file is kept unless --force

${BILLING_OPTIONS_HELP}
--json                one JSON document on standard output: billing's own answer`,
  default: {
    summary: "The platform's invoices, newest first",
    usage: `core billing invoices [--limit <n>] [--cursor <cursor>] [--billing-url <url>] [--token <token>] [--platform <id>] [--json]

--limit <n>           how many, 1 to 100; default 25
--cursor <cursor>     the next page, as the previous one names it
${BILLING_OPTIONS_HELP}

One invoice: core billing invoices show <id>; its PDF: core billing invoices pdf <id> -o <file>`,
    options: { ...BILLING_OPTIONS, limit: { type: "string" }, cursor: { type: "string" } },
    run: (ctx, v) => billing.invoices(ctx, billingOptions(v), { limit: v.limit as string | undefined, cursor: v.cursor as string | undefined }),
  },
  commands: {
    show: {
      summary: "One invoice: lines with quantity, unit price and amount, and the totals",
      usage: `core billing invoices show <id> [--billing-url <url>] [--token <token>] [--platform <id>] [--json]

<id>                  the invoice's id (in_…), as core billing invoices --json lists it
${BILLING_OPTIONS_HELP}
--json                billing's invoice, lines and all`,
      options: BILLING_OPTIONS,
      args: ["id"],
      run: (ctx, v, [id]) => billing.invoice(ctx, billingOptions(v), id!),
    },
    pdf: {
      summary: "Download an invoice's PDF",
      usage: `core billing invoices pdf <id> -o <file> [--force] [--billing-url <url>] [--token <token>] [--platform <id>] [--json]

<id>                  the invoice's id (in_…)
-o, --output <file>   where to write it; the file is written whole or not at all
--force               replace the file when it exists (without it, an existing file is kept and
                      nothing is downloaded)
${BILLING_OPTIONS_HELP}`,
      options: { ...BILLING_OPTIONS, output: { type: "string", short: "o" }, force: { type: "boolean" } },
      args: ["id"],
      run: (ctx, v, [id]) => billing.invoicePdf(ctx, billingOptions(v), id!, { output: v.output as string | undefined, force: v.force === true }),
    },
  },
};

const CARDS: Group = {
  summary: "The platform's cards: list, add, remove, choose the default",
  usage: `core billing cards [add <pm_…> [--default] | remove <pm_…> [--yes] | default <pm_…>] [options]

  (nothing)               the cards; the default is the one renewals charge
  add <pm_…>              attach a card: a payment method id, or a Stripe test token with the local
                          provider (pm_card_visa, pm_card_mastercard, …); the first card, or --default,
                          becomes the default
  remove <pm_…>           detach a card (asks first; --yes for scripts); removing the default while a
                          paid plan runs is allowed, with a warning: the next renewal then fails
  default <pm_…>          make a card the default; payments that failed are tried again with it at once

${BILLING_OPTIONS_HELP}
--json                one JSON document on standard output: billing's own answer`,
  default: {
    summary: "The platform's cards",
    usage: `core billing cards [--billing-url <url>] [--token <token>] [--platform <id>] [--json]

${BILLING_OPTIONS_HELP}`,
    options: BILLING_OPTIONS,
    run: (ctx, v) => billing.cards(ctx, billingOptions(v)),
  },
  commands: {
    add: {
      summary: "Attach a card; the first one, or --default, becomes the default",
      usage: `core billing cards add <pm_…> [--default] [--billing-url <url>] [--token <token>] [--platform <id>] [--json]

<pm_…>                a payment method id, or a Stripe test token the local provider knows
                      (pm_card_visa, pm_card_mastercard, pm_card_amex; pm_card_visa_chargeDeclined is refused)
--default             make it the default card: renewals charge it, and payments that failed are
                      tried again with it at once
${BILLING_OPTIONS_HELP}`,
      options: { ...BILLING_OPTIONS, default: { type: "boolean" } },
      args: ["card"],
      run: (ctx, v, [card]) => billing.addCard(ctx, billingOptions(v), card!, { setAsDefault: v.default === true }),
    },
    remove: {
      summary: "Detach a card (asks first)",
      usage: `core billing cards remove <pm_…> [--yes] [--billing-url <url>] [--token <token>] [--platform <id>] [--json]

<pm_…>                the card's id, as core billing cards lists it
${YES_HELP}
${BILLING_OPTIONS_HELP}

Removing the default card while a paid plan runs is allowed (as Stripe allows it), with a warning:
the next renewal fails unless another card is made the default first.`,
      options: { ...BILLING_OPTIONS, ...YES_OPTION },
      args: ["card"],
      run: (ctx, v, [card]) => billing.removeCard(ctx, billingOptions(v), card!, { yes: v.yes === true }),
    },
    default: {
      summary: "Make a card the default; failed payments are tried again with it",
      usage: `core billing cards default <pm_…> [--billing-url <url>] [--token <token>] [--platform <id>] [--json]

<pm_…>                the card's id, as core billing cards lists it
${BILLING_OPTIONS_HELP}`,
      options: BILLING_OPTIONS,
      args: ["card"],
      run: (ctx, v, [card]) => billing.defaultCard(ctx, billingOptions(v), card!),
    },
  },
};

const BILLING: Group = {
  summary: "Your platform's plan and payments: status, plans, upgrade, change-tier, cancel, resume, invoices, cards, portal",
  usage: `core billing <command> [options]

  status                  the plan, its status, the current period and the next charge
  plans                   the price list (needs no login)
  upgrade <tier>          move a free platform to starter, growth or scale, paying with a card
  change-tier <tier>      move a paid platform to another tier: shows the prorated charge, then asks
  cancel                  cancel at the end of the period (asks first); the platform returns to free then
  resume                  call off a cancellation: the plan renews as before
  upcoming                the next invoice: its lines, tax and what the card will be charged
  invoices                the platform's invoices, newest first
  invoices show <id>      one invoice: lines with quantity, unit price and amount, and the totals
  invoices pdf <id> -o <file>
                          download an invoice's PDF
  cards                   the platform's cards; cards add|remove|default <pm_…> manage them
  portal                  open the billing portal: prints its address, and offers to open a browser

Every billing command takes:
${BILLING_OPTIONS_HELP}
--json                one JSON document on standard output: billing's own answer

Commands that ask first (change-tier, cancel, cards remove) take --yes for scripts; without a terminal
and without --yes they change nothing and exit 1.
Reading needs billing:read, changing billing:manage; a platform's owners have both.`,
  commands: {
    status: {
      summary: "The plan, its status, the current period and the next charge",
      usage: `core billing status [--billing-url <url>] [--token <token>] [--platform <id>] [--json]

${BILLING_OPTIONS_HELP}`,
      options: BILLING_OPTIONS,
      run: (ctx, v) => billing.status(ctx, billingOptions(v)),
    },
    plans: {
      summary: "The price list",
      usage: `core billing plans [--billing-url <url>] [--json]

--billing-url <url>   billing address; else CORE_BILLING_URL, else http://localhost:4200`,
      options: { "billing-url": { type: "string" } },
      run: (ctx, v) => billing.plans(ctx, billingOptions(v)),
    },
    upgrade: {
      summary: "Move a free platform to a paid tier, paying with a card",
      usage: `core billing upgrade <tier> [--card <pm_…>] [--email <address>] [--billing-url <url>] [--token <token>] [--platform <id>] [--json]

<tier>                starter, growth or scale; the first month is charged at once
--card <pm_…>         the card: a payment method id or a Stripe test token; default ${DEFAULT_CARD}
                      (a test card the local provider accepts; pm_card_visa_chargeDeclined is refused)
--email <address>     where invoices go; default your login's email
${BILLING_OPTIONS_HELP}

A paid platform changes tier with core billing change-tier.`,
      options: { ...BILLING_OPTIONS, card: { type: "string" }, email: { type: "string" } },
      args: ["tier"],
      run: (ctx, v, [tier]) => billing.upgrade(ctx, billingOptions(v), tier!, { card: v.card as string | undefined, email: v.email as string | undefined }),
    },
    "change-tier": {
      summary: "Move a paid platform to another tier, after showing the prorated charge",
      usage: `core billing change-tier <tier> [--yes] [--billing-url <url>] [--token <token>] [--platform <id>] [--json]

<tier>                starter, growth or scale
${YES_HELP}
${BILLING_OPTIONS_HELP}

A higher tier applies now and charges the prorated difference, exactly the amount shown; a lower
one takes effect at the end of the period, with no charge and no refund.`,
      options: { ...BILLING_OPTIONS, ...YES_OPTION },
      args: ["tier"],
      run: (ctx, v, [tier]) => billing.changeTier(ctx, billingOptions(v), tier!, { yes: v.yes === true }),
    },
    cancel: {
      summary: "Cancel at the end of the period (asks first)",
      usage: `core billing cancel [--yes] [--billing-url <url>] [--token <token>] [--platform <id>] [--json]

The plan stays until the end of the period; then the platform returns to free and nothing more is
charged. Until then core billing resume calls the cancellation off.
${YES_HELP}
${BILLING_OPTIONS_HELP}`,
      options: { ...BILLING_OPTIONS, ...YES_OPTION },
      run: (ctx, v) => billing.cancel(ctx, billingOptions(v), { yes: v.yes === true }),
    },
    resume: {
      summary: "Call off a cancellation: the plan renews as before",
      usage: `core billing resume [--billing-url <url>] [--token <token>] [--platform <id>] [--json]

Nothing is charged now; the plan renews at the end of the period. Resuming a plan that is not
cancelling answers the same subscription.
${BILLING_OPTIONS_HELP}`,
      options: BILLING_OPTIONS,
      run: (ctx, v) => billing.resume(ctx, billingOptions(v)),
    },
    upcoming: {
      summary: "The next invoice: lines, tax and what the card will be charged",
      usage: `core billing upcoming [--billing-url <url>] [--token <token>] [--platform <id>] [--json]

The invoice the next renewal makes: the next period at the waiting tier and seats, this period's
usage beyond the plan so far, tax and credit. --json is billing's answer, or null when nothing will
be charged (the free plan, or a plan that cancels).
${BILLING_OPTIONS_HELP}`,
      options: BILLING_OPTIONS,
      run: (ctx, v) => billing.upcoming(ctx, billingOptions(v)),
    },
    invoices: INVOICES,
    cards: CARDS,
    portal: {
      summary: "Open the billing portal: prints its address and offers to open a browser",
      usage: `core billing portal [--return-url <url>] [--no-browser] [--billing-url <url>] [--token <token>] [--platform <id>] [--json]

Makes a portal session (valid for an hour) and prints its address. At a terminal that can open a
browser, Enter opens it (never when CI or CORE_NO_BROWSER is set), as core login does.
--return-url <url>    where the portal's Back link goes; default your IAM account page
--no-browser          do not offer to open a browser
${BILLING_OPTIONS_HELP}`,
      options: { ...BILLING_OPTIONS, "return-url": { type: "string" }, "no-browser": { type: "boolean" } },
      run: (ctx, v) => billing.portal(ctx, billingOptions(v), { returnUrl: v["return-url"] as string | undefined, noBrowser: v["no-browser"] === true }),
    },
  },
};

const COMMANDS: Record<string, Command | Group> = {
  login: {
    summary: "Log in: approve in a browser (device login), or give a token (CI)",
    usage: `core login [--token <token> | --token -] [--iam-url <url>] [--no-browser] [--json]

Without --token, prints a code and an address: open it in a browser, sign in and approve. At a
terminal that can open a browser, Enter opens the address (never when CI or CORE_NO_BROWSER is set).
--no-browser      do not offer to open a browser
--token <token>   store this access token instead (for CI); --token - reads it from standard input,
                  so it stays out of the shell history
--iam-url <url>   IAM address; else CORE_IAM_URL, else http://localhost:4100`,
    options: { token: { type: "string" }, ...IAM_URL_OPTION, "no-browser": { type: "boolean" } },
    run: (ctx, v) => login(ctx, { token: v.token as string | undefined, iamUrl: v["iam-url"] as string | undefined, noBrowser: v["no-browser"] === true }),
  },
  logout: {
    summary: "Revoke the session on the server and delete the stored login",
    usage: "core logout [--json]",
    options: {},
    run: (ctx) => logout(ctx),
  },
  whoami: {
    summary: "Show who IAM says the credential in use belongs to",
    usage: `core whoami [--iam-url <url>] [--json]

--iam-url <url>   IAM address for CORE_TOKEN; a stored login always asks the IAM it came from`,
    options: { ...IAM_URL_OPTION },
    run: (ctx, v) => whoami(ctx, { iamUrl: v["iam-url"] as string | undefined }),
  },
  status: {
    summary: "Show which credential is in use and where it is stored (no network)",
    usage: "core status [--json]",
    options: {},
    run: (ctx) => status(ctx),
  },
  token: {
    summary: "Print a valid access token, refreshing an expired one",
    usage: `core token [--json]

Prints only the token, for other tools: curl -H "authorization: Bearer $(core token)" ...`,
    options: {},
    run: (ctx) => token(ctx),
  },
  org: ORG,
  stacks: STACKS,
  billing: BILLING,
};

/**
 * The command a mistyped word most likely meant: a command within two edits (one for short words),
 * or one the word begins or ends (`stack` → `stacks`). Null when nothing is close.
 */
export function nearest(typed: string, candidates: string[]): string | null {
  const word = typed.toLowerCase();
  let best: { name: string; distance: number } | null = null;
  for (const name of candidates) {
    const distance = name.startsWith(word) || word.startsWith(name) ? Math.abs(name.length - word.length) * 0.5 : editDistance(word, name);
    if (distance <= (word.length <= 4 ? 1 : 2) && (!best || distance < best.distance)) best = { name, distance };
  }
  return best?.name ?? null;
}

/**
 * A top-level word: a command near it, else a group's command of that very name, however deep
 * (`core invoices` → `core billing invoices`, `core pdf` → `core billing invoices pdf`).
 */
function nearestCommand(typed: string): string | null {
  return nearest(typed, Object.keys(COMMANDS)) ?? commandNamed(typed, COMMANDS, "");
}

/** The first command or group called `word` inside `commands` (depth first), with the words that lead to it. */
function commandNamed(word: string, commands: Record<string, Command | Group>, path: string): string | null {
  for (const [name, entry] of Object.entries(commands)) {
    if (!("commands" in entry)) continue;
    const inside = `${path}${name} `;
    if (Object.hasOwn(entry.commands, word)) return `${inside}${word}`;
    const deeper = commandNamed(word, entry.commands, inside);
    if (deeper) return deeper;
  }
  return null;
}

/** Levenshtein distance with adjacent transpositions (`lsit` is one edit from `list`). */
function editDistance(a: string, b: string): number {
  const rows = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array<number>(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) rows[0]![j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min(rows[i - 1]![j]! + 1, rows[i]![j - 1]! + 1, rows[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d = Math.min(d, rows[i - 2]![j - 2]! + 1);
      rows[i]![j] = d;
    }
  }
  return rows[a.length]![b.length]!;
}

const COMMON_OPTIONS = { json: { type: "boolean" as const }, help: { type: "boolean" as const, short: "h" } };

const HELP = `core ${VERSION}: sign in to the Core control plane from a terminal or a CI job

Usage: core <command> [options]

Commands:
${Object.entries(COMMANDS)
  .map(([name, c]) => `  ${name.padEnd(8)}${c.summary}`)
  .join("\n")}

Options:
  --json          print one JSON document on standard output (for scripts)
  -h, --help      help; core <command> --help for one command
  -v, --version   the version

Environment:
  CORE_TOKEN      an access token that commands use instead of the stored login (CI)
  CORE_IAM_URL    IAM address when --iam-url is not given (default http://localhost:4100)
  CORE_STACK_REGISTRY_URL   stack registry address when --registry-url is not given (default http://localhost:4300)
  CORE_BILLING_URL          billing address when --billing-url is not given (default http://localhost:4200)
  CORE_HOME       where the login is stored (default ~/.core, file credentials.json)
  CORE_LOGIN_TIMEOUT_SECONDS   how long core login waits for approval (default 300)
  CORE_NO_BROWSER=1   core login and core billing portal do not offer to open a browser (nor when CI is set)
  BROWSER         the command they open the address with (%s for the address), instead of the system's
  CORE_DEBUG=1    log each request (IAM, stack registry, billing) on standard error

Exit code 0 on success, 1 on any failure.`;

export interface Terminal {
  stdout(text: string): void;
  stderr(text: string): void;
  readStdinLine(prompt: string): Promise<string>;
  /** the Enter key, while other work goes on; `cancel` lets standard input go */
  waitForEnter(): { pressed: Promise<void>; cancel(): void };
  /** standard input is a terminal: a question can be answered there */
  interactive: boolean;
  env: NodeJS.ProcessEnv;
}

/** Runs one `core` invocation; answers the exit code. Failures print a message, never a stack. */
export async function run(argv: string[], terminal: Terminal): Promise<number> {
  const json = argv.includes("--json");
  const debug = terminal.env.CORE_DEBUG === "1";
  // `npx core -- --help` hands the separator on
  const [name, ...rest] = argv[0] === "--" ? argv.slice(1) : argv;
  try {
    if (name === undefined || name === "help" || name === "--help" || name === "-h") {
      // core help billing cards add: the deepest topic the words name
      let topic: Command | Group | undefined = name === "help" && rest[0] ? COMMANDS[rest[0]] : undefined;
      for (const word of name === "help" ? rest.slice(1) : []) {
        if (!topic || !("commands" in topic) || !Object.hasOwn(topic.commands, word)) break;
        topic = topic.commands[word];
      }
      terminal.stdout(topic ? `Usage: ${topic.usage}` : HELP);
      return 0;
    }
    if (name === "--version" || name === "-v") {
      terminal.stdout(json ? JSON.stringify({ version: VERSION }) : VERSION);
      return 0;
    }
    const found = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
    if (!found) {
      if (name.startsWith("-")) throw failures.usage(`Unknown option ${name}`);
      throw failures.unknownCommand(name, nearestCommand(name));
    }
    let entry: Command | Group = found;
    let label = name;
    let args = rest;
    // down the groups: core billing cards add <pm_…>
    while ("commands" in entry) {
      const group: Group = entry;
      const sub = args[0];
      if (sub === "--help" || sub === "-h" || sub === "help") {
        terminal.stdout(`Usage: ${group.usage}`);
        return 0;
      }
      if (sub === undefined || (sub.startsWith("-") && group.default)) {
        if (group.default) {
          entry = group.default;
          break;
        }
        throw failures.usage(`Missing a command: core ${label} ${Object.keys(group.commands).join("|")}`, label);
      }
      if (!Object.hasOwn(group.commands, sub)) {
        if (sub.startsWith("-")) throw failures.usage(`Unknown option ${sub}`, label);
        const near = nearest(sub, Object.keys(group.commands)) ?? commandNamed(sub, group.commands, "");
        throw failures.unknownCommand(sub, near && `${label} ${near}`, label);
      }
      entry = group.commands[sub]!;
      label = `${label} ${sub}`;
      args = args.slice(1);
    }
    const command: Command = entry;
    const { values, positionals } = parseOptions(label, command, args);
    if (values.help) {
      terminal.stdout(`Usage: ${command.usage}`);
      return 0;
    }

    const settings = readSettings(terminal.env);
    const userAgent = `core-cli/${VERSION} node/${process.versions.node}`;
    const say = json ? terminal.stderr : terminal.stdout;
    const ctx: Context = {
      settings,
      say,
      warn: terminal.stderr,
      debug: (text) => debug && terminal.stderr(`core: ${text}`),
      now: () => Date.now(),
      sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
      readStdinLine: terminal.readStdinLine,
      waitForEnter: terminal.waitForEnter,
      interactive: terminal.interactive,
      browser: browserOpener(terminal.env),
      iam: (iamUrl) => new IamClient(iamUrl, { userAgent, debug: ctx.debug }),
      stackRegistry: (baseUrl, token) => new StackRegistryClient(baseUrl, { token, userAgent, debug: ctx.debug }),
      billing: (baseUrl, token) => new BillingClient(baseUrl, { token, userAgent, debug: ctx.debug }),
    };
    const outcome = await command.run(ctx, values, positionals);
    // a command that said everything as it went (core billing portal at a terminal) prints nothing more
    if (json || outcome.text !== "") terminal.stdout(json ? JSON.stringify(outcome.json, null, 2) : outcome.text);
    return 0;
  } catch (err) {
    const failure = err instanceof CliFailure ? err : new CliFailure("unexpected", `core failed: ${(err as Error)?.message ?? String(err)}`);
    if (debug && !(err instanceof CliFailure)) terminal.stderr(String((err as Error)?.stack ?? err));
    if (json) terminal.stdout(JSON.stringify({ error: { code: failure.code, message: failure.message, ...failure.extra } }, null, 2));
    else terminal.stderr(failure.message);
    return 1;
  }
}

/** node:util parseArgs, strict: unknown options, missing and stray arguments are usage failures. */
function parseOptions(name: string, command: Command, args: string[]): { values: Values; positionals: string[] } {
  let parsed: { values: Values; positionals: string[] };
  try {
    parsed = parseArgs({ args, options: { ...COMMON_OPTIONS, ...command.options }, strict: true, allowPositionals: command.args !== undefined });
  } catch (err) {
    const code = (err as { code?: string }).code;
    const quoted = /'([^']+)'/.exec((err as Error).message)?.[1] ?? "";
    if (code === "ERR_PARSE_ARGS_UNKNOWN_OPTION") throw failures.usage(`Unknown option ${quoted}`, name);
    if (code === "ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL") throw failures.usage(`Unexpected argument "${quoted}"`, name);
    if (code === "ERR_PARSE_ARGS_INVALID_OPTION_VALUE") throw failures.usage(`${quoted.split(" ")[0]} needs a value`, name);
    throw failures.usage((err as Error).message, name);
  }
  const expected = command.args ?? [];
  if (parsed.values.help) return parsed;
  const missing = expected.filter((arg, i) => !arg.endsWith("?") && parsed.positionals[i] === undefined);
  if (missing.length > 0) throw failures.usage(`Missing ${missing.map((arg) => `<${arg}>`).join(" ")}`, name);
  const stray = parsed.positionals[expected.length];
  if (stray !== undefined) throw failures.usage(`Unexpected argument "${stray}"`, name);
  return parsed;
}
