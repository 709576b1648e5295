import { parseArgs } from "node:util";
import { login } from "./commands/login.js";
import { logout } from "./commands/logout.js";
import { status } from "./commands/status.js";
import { token } from "./commands/token.js";
import { whoami } from "./commands/whoami.js";
import type { Context, Outcome } from "./context.js";
import { CliFailure, failures } from "./failures.js";
import { IamClient } from "./iam-client.js";
import { readSettings } from "./settings.js";

/** Set by the build (scripts/build.mjs) from packages/cli/package.json. */
declare const CORE_CLI_VERSION: string | undefined;
export const VERSION = typeof CORE_CLI_VERSION === "string" ? CORE_CLI_VERSION : "0.0.0-dev";

type Values = { [name: string]: string | boolean | undefined };

interface Command {
  summary: string;
  usage: string;
  options: Record<string, { type: "string" | "boolean"; short?: string }>;
  run(ctx: Context, values: Values): Promise<Outcome>;
}

const IAM_URL_OPTION = { "iam-url": { type: "string" as const } };

const COMMANDS: Record<string, Command> = {
  login: {
    summary: "Log in: approve in a browser (device login), or give a token (CI)",
    usage: `core login [--token <token> | --token -] [--iam-url <url>] [--json]

Without --token, prints a code and an address: open it in a browser, sign in and approve.
--token <token>   store this access token instead (for CI); --token - reads it from standard input,
                  so it stays out of the shell history
--iam-url <url>   IAM address; else CORE_IAM_URL, else http://localhost:4100`,
    options: { token: { type: "string" }, ...IAM_URL_OPTION },
    run: (ctx, v) => login(ctx, { token: v.token as string | undefined, iamUrl: v["iam-url"] as string | undefined }),
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
};

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
  CORE_HOME       where the login is stored (default ~/.core, file credentials.json)
  CORE_LOGIN_TIMEOUT_SECONDS   how long core login waits for approval (default 300)
  CORE_DEBUG=1    log each request to IAM on standard error

Exit code 0 on success, 1 on any failure.`;

export interface Terminal {
  stdout(text: string): void;
  stderr(text: string): void;
  readStdinLine(prompt: string): Promise<string>;
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
      const topic = name === "help" && rest[0] ? COMMANDS[rest[0]] : undefined;
      terminal.stdout(topic ? `Usage: ${topic.usage}` : HELP);
      return 0;
    }
    if (name === "--version" || name === "-v") {
      terminal.stdout(json ? JSON.stringify({ version: VERSION }) : VERSION);
      return 0;
    }
    const command = COMMANDS[name];
    if (!command) throw failures.usage(name.startsWith("-") ? `Unknown option ${name}` : `Unknown command "${name}"`);
    const values = parseOptions(name, command, rest);
    if (values.help) {
      terminal.stdout(`Usage: ${command.usage}`);
      return 0;
    }

    const settings = readSettings(terminal.env);
    const say = json ? terminal.stderr : terminal.stdout;
    const ctx: Context = {
      settings,
      say,
      warn: terminal.stderr,
      debug: (text) => debug && terminal.stderr(`core: ${text}`),
      now: () => Date.now(),
      sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
      readStdinLine: terminal.readStdinLine,
      iam: (iamUrl) => new IamClient(iamUrl, { userAgent: `core-cli/${VERSION} node/${process.versions.node}`, debug: ctx.debug }),
    };
    const outcome = await command.run(ctx, values);
    terminal.stdout(json ? JSON.stringify(outcome.json, null, 2) : outcome.text);
    return 0;
  } catch (err) {
    const failure = err instanceof CliFailure ? err : new CliFailure("unexpected", `core failed: ${(err as Error)?.message ?? String(err)}`);
    if (debug && !(err instanceof CliFailure)) terminal.stderr(String((err as Error)?.stack ?? err));
    if (json) terminal.stdout(JSON.stringify({ error: { code: failure.code, message: failure.message } }, null, 2));
    else terminal.stderr(failure.message);
    return 1;
  }
}

/** node:util parseArgs, strict: unknown options and stray arguments are usage failures. */
function parseOptions(name: string, command: Command, args: string[]): Values {
  try {
    return parseArgs({ args, options: { ...COMMON_OPTIONS, ...command.options }, strict: true, allowPositionals: false }).values;
  } catch (err) {
    const code = (err as { code?: string }).code;
    const quoted = /'([^']+)'/.exec((err as Error).message)?.[1] ?? "";
    if (code === "ERR_PARSE_ARGS_UNKNOWN_OPTION") throw failures.usage(`Unknown option ${quoted}`, name);
    if (code === "ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL") throw failures.usage(`Unexpected argument "${quoted}"`, name);
    if (code === "ERR_PARSE_ARGS_INVALID_OPTION_VALUE") throw failures.usage(`${quoted.split(" ")[0]} needs a value`, name);
    throw failures.usage((err as Error).message, name);
  }
}
