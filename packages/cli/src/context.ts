import type { BillingClient } from "./billing-client.js";
import type { browserOpener } from "./browser.js";
import { readCredential, type Credential } from "./credentials.js";
import type { IamClient } from "./iam-client.js";
import { resolveIamUrl, type Settings } from "./settings.js";
import type { StackRegistryClient } from "./stack-registry-client.js";

/** What every command gets: the environment's settings, the terminal and the way to IAM. */
export interface Context {
  settings: Settings;
  /** progress for the person at the terminal: stdout, or stderr under `--json` */
  say(text: string): void;
  /** warnings and notes: stderr */
  warn(text: string): void;
  /** stderr under `CORE_DEBUG=1` */
  debug(text: string): void;
  now(): number;
  sleep(ms: number): Promise<void>;
  /** the first line of standard input (`core login --token -`); `prompt` is shown on a terminal */
  readStdinLine(prompt: string): Promise<string>;
  /** standard input is a terminal, so a question can be asked and answered there */
  interactive: boolean;
  /** the Enter key at the terminal, while other work goes on; `cancel` lets standard input go */
  waitForEnter(): { pressed: Promise<void>; cancel(): void };
  /** how a browser can be opened here, or why not (CI, CORE_NO_BROWSER, no graphical session) */
  browser: ReturnType<typeof browserOpener>;
  iam(iamUrl: string): IamClient;
  /** the stack registry at `baseUrl`, sending `token` as the credential (bearer, or `x-api-key` for an API key) */
  stackRegistry(baseUrl: string, token: string): StackRegistryClient;
  /** billing at `baseUrl`, sending `token` when given (the price list needs none) */
  billing(baseUrl: string, token: string | undefined): BillingClient;
}

/** What a command reports: lines for a person, or one JSON document under `--json`. */
export interface Outcome {
  text: string;
  /** null where billing's answer is "nothing" (core billing upcoming on a free plan) */
  json: object | null;
}

/** The credential commands use: `CORE_TOKEN` wins over the stored file (for CI). */
export type ActiveCredential =
  | { source: "env"; token: string; iamUrl: string; stored: Credential | null }
  | { source: "file"; token: string; iamUrl: string; stored: Credential };

/**
 * `CORE_TOKEN` talks to the IAM of `--iam-url`, `CORE_IAM_URL` or the default (spec §4.8); a stored
 * login only ever goes back to the IAM it came from, so its token is never sent anywhere else.
 */
export async function activeCredential(settings: Settings, iamUrlFlag?: string): Promise<ActiveCredential | null> {
  if (settings.envToken) {
    // the file only matters for saying it is ignored; a damaged one must not stop a CI job
    const stored = await readCredential(settings.credentialsPath).catch(() => null);
    return { source: "env", token: settings.envToken, iamUrl: resolveIamUrl(iamUrlFlag, settings), stored };
  }
  const stored = await readCredential(settings.credentialsPath);
  return stored && { source: "file", token: stored.token, iamUrl: stored.iamUrl, stored };
}

export const describeSource = (active: ActiveCredential) => (active.source === "env" ? "the token in CORE_TOKEN" : "the stored token");
