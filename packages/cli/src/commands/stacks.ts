import { readFile } from "node:fs/promises";
import type { Context, Outcome } from "../context.js";
import { failures } from "../failures.js";
import { plural, table, when } from "../format.js";
import { Unreachable, type Refusal, type Reply } from "../http.js";
import { resolveStackRegistryUrl } from "../settings.js";
import type { StackRegistryClient, StackTemplate, StackVersion } from "../stack-registry-client.js";
import { tokenToSend } from "./token.js";

/** Spec §8: a template name. */
const NAME = /^[a-z0-9-]{1,64}$/;
/** Spec §9: stack versions and `coreSdkVersion`. */
const SEMVER = /^[0-9]+[.][0-9]+[.][0-9]+(-[a-zA-Z0-9.]+)?$/;

export interface StacksOptions {
  registryUrl?: string;
  token?: string;
}

/**
 * `core stacks …`: the stack registry's catalogue (spec §4.5) from a terminal or a CI job. Reads need
 * any valid credential, publishing and deprecating the `stacks:publish` permission (operators).
 */
export const stacks = {
  async list(ctx: Context, options: StacksOptions): Promise<Outcome> {
    const session = await connect(ctx, options);
    const answer = await ask(session, "Listing the stack templates", {}, (r) => r.list());
    const data = arrayOf<StackTemplate>(answer.data, session.registry.baseUrl);
    const text =
      data.length === 0
        ? "No active stack templates."
        : `${table(
            ["NAME", "DISPLAY NAME", "LATEST", "DOMAIN", "STATUS", "UPDATED"],
            data.map((t) => [t.name, t.display_name, t.latest_version || "-", t.domain || "-", t.status, when(t.updated_at)]),
          )}\n${plural(answer.total ?? data.length, "template")}`;
    return { text, json: { data, total: answer.total ?? data.length } };
  },

  async show(ctx: Context, options: StacksOptions, name: string, version?: string): Promise<Outcome> {
    checkName(name);
    if (version !== undefined) checkSemver(version, "<version>");
    const session = await connect(ctx, options);
    if (version !== undefined) return showVersion(session, name, version);
    const answer = await ask(session, `Showing ${name}`, { name }, (r) => r.show(name));
    const t = answer.template;
    if (!t || typeof t !== "object") throw failures.registryAnswerUnreadable(session.registry.baseUrl);
    const latest = answer.latestVersion;
    const latestText =
      latest && typeof latest === "object"
        ? `${latest.version} (core SDK ${latest.core_sdk_version}, published ${when(latest.published_at)})`
        : typeof latest === "string" && latest
          ? latest
          : t.latest_version || "none (no version published)";
    const text = [
      `${t.name}: ${t.display_name}`,
      `  description: ${t.description}`,
      `  domain:      ${t.domain || "-"}`,
      `  icon:        ${t.icon || "-"}`,
      `  status:      ${t.status}`,
      `  latest:      ${latestText}`,
      `  created:     ${when(t.created_at)}`,
      `  updated:     ${when(t.updated_at)}`,
      `  id:          ${t.id}`,
    ].join("\n");
    return { text, json: { template: t, latestVersion: latest ?? null } };
  },

  async versions(ctx: Context, options: StacksOptions, name: string): Promise<Outcome> {
    checkName(name);
    const session = await connect(ctx, options);
    const answer = await ask(session, `Listing the versions of ${name}`, { name }, (r) => r.versions(name));
    const data = arrayOf<StackVersion>(answer.data, session.registry.baseUrl);
    const text =
      data.length === 0
        ? `${name} has no published versions.`
        : `${table(
            ["VERSION", "STATUS", "CORE SDK", "PUBLISHED"],
            data.map((v) => [v.version, v.status, v.core_sdk_version, when(v.published_at)]),
          )}\n${plural(answer.total ?? data.length, "version")}`;
    return { text, json: { data, total: answer.total ?? data.length } };
  },

  async create(ctx: Context, options: StacksOptions, input: { name: string; displayName?: string; description?: string; icon?: string; domain?: string }): Promise<Outcome> {
    checkName(input.name);
    if (input.displayName === undefined) throw failures.usage("Missing --display-name <text>", "stacks create");
    if (input.description === undefined) throw failures.usage("Missing --description <text>", "stacks create");
    const session = await connect(ctx, options);
    const body = {
      name: input.name,
      displayName: input.displayName,
      description: input.description,
      ...(input.icon !== undefined && { icon: input.icon }),
      ...(input.domain !== undefined && { domain: input.domain }),
    };
    const answer = await ask(session, `Creating ${input.name}`, { name: input.name }, (r) => r.create(body));
    return {
      text: [
        `Created the template ${input.name} ("${input.displayName}") at ${session.registry.baseUrl}: id ${answer.id}`,
        `Publish its first version: core stacks publish ${input.name} <version> --definition <file.json> --sdk <semver>`,
      ].join("\n"),
      json: { created: true, id: answer.id, name: input.name, registryUrl: session.registry.baseUrl },
    };
  },

  async update(
    ctx: Context,
    options: StacksOptions,
    input: { name: string; displayName?: string; description?: string; icon?: string; reactivate?: boolean },
  ): Promise<Outcome> {
    checkName(input.name);
    const changes = {
      ...(input.displayName !== undefined && { displayName: input.displayName }),
      ...(input.description !== undefined && { description: input.description }),
      ...(input.icon !== undefined && { icon: input.icon }),
      ...(input.reactivate && { status: "active" as const }),
    };
    const changed = Object.keys(changes);
    if (changed.length === 0) throw failures.usage("Nothing to change: give --display-name, --description, --icon or --reactivate", "stacks update");
    const session = await connect(ctx, options);
    await ask(session, `Updating ${input.name}`, { name: input.name }, (r) => r.update(input.name, changes));
    const said = [
      input.displayName !== undefined && `display name "${input.displayName}"`,
      input.description !== undefined && "description",
      input.icon !== undefined && (input.icon === "" ? "icon cleared" : "icon"),
      input.reactivate && "active again (listed, and it takes new versions)",
    ].filter(Boolean);
    return {
      text: `Updated ${input.name}: ${said.join(", ")}.`,
      json: { ok: true, name: input.name, changed: changed.map((field) => (field === "status" ? "reactivated" : field)) },
    };
  },

  async publish(ctx: Context, options: StacksOptions, input: { name: string; version: string; definition?: string; sdk?: string }): Promise<Outcome> {
    // everything that can be checked here is, before any request (spec §8, §9)
    checkName(input.name);
    checkSemver(input.version, "<version>");
    if (input.definition === undefined) throw failures.usage("Missing --definition <file.json>", "stacks publish");
    if (input.sdk === undefined) throw failures.usage("Missing --sdk <semver>", "stacks publish");
    checkSemver(input.sdk, "--sdk");
    const stackDefinition = await readDefinition(input.definition);

    const session = await connect(ctx, options);
    const { registry } = session;
    const what = `${input.name} ${input.version}`;
    const answer = await ask(session, `Publishing ${what}`, { name: input.name, version: input.version }, (r) =>
      r.publish(input.name, { version: input.version, stackDefinition, coreSdkVersion: input.sdk! }),
    );
    return {
      text: `Published ${what} (core SDK ${input.sdk}) to ${registry.baseUrl}: version id ${answer.id}`,
      json: { published: true, id: answer.id, name: input.name, version: input.version, coreSdkVersion: input.sdk, registryUrl: registry.baseUrl },
    };
  },

  async deprecate(ctx: Context, options: StacksOptions, name: string, version?: string): Promise<Outcome> {
    checkName(name);
    if (version !== undefined) checkSemver(version, "<version>");
    const session = await connect(ctx, options);
    if (version === undefined) {
      await ask(session, `Deprecating ${name}`, { name }, (r) => r.deprecateTemplate(name));
      return {
        text: `Deprecated the template ${name}: it no longer appears in core stacks list.`,
        json: { ok: true, deprecated: "template", name, version: null },
      };
    }
    await ask(session, `Deprecating ${name} ${version}`, { name, version }, (r) => r.deprecateVersion(name, version));
    return {
      text: `Deprecated ${name} ${version}: it stays readable, and is no longer a candidate for latest.`,
      json: { ok: true, deprecated: "version", name, version },
    };
  },
};

/** One published version, with its definition pretty-printed (spec §2.9 keeps it as a JSON string). */
async function showVersion(session: Session, name: string, version: string): Promise<Outcome> {
  const v = await ask(session, `Showing ${name} ${version}`, { name, version }, (r) => r.version(name, version));
  if (!v || typeof v !== "object" || typeof v.stack_definition !== "string") throw failures.registryAnswerUnreadable(session.registry.baseUrl);
  let definition = v.stack_definition;
  try {
    definition = JSON.stringify(JSON.parse(v.stack_definition), null, 2);
  } catch {
    // shown as the registry stored it
  }
  const text = [
    `${name} ${v.version}`,
    `  status:      ${v.status}`,
    `  core SDK:    ${v.core_sdk_version}`,
    `  published:   ${when(v.published_at)}`,
    `  id:          ${v.id}`,
    `  definition:`,
    ...definition.split("\n").map((line) => `    ${line}`),
  ].join("\n");
  return { text, json: v };
}

/** The registry address and the credential: `--token`, else CORE_TOKEN, else the stored login (refreshed). */
async function connect(ctx: Context, options: StacksOptions): Promise<Session> {
  const baseUrl = resolveStackRegistryUrl(options.registryUrl, ctx.settings);
  const { token, source } = await tokenToSend(ctx, options.token);
  return { registry: ctx.stackRegistry(baseUrl, token), source };
}

/** The client, and which credential it carries (for the message when the registry refuses it). */
interface Session {
  registry: StackRegistryClient;
  source: string;
}

/**
 * One request: its answer, or a failure that shows the envelope's code and message (with the
 * failing fields of a VALIDATION_ERROR) and what to do next.
 */
async function ask<T>(session: Session, action: string, subject: { name?: string; version?: string }, call: (registry: StackRegistryClient) => Promise<Reply<T>>): Promise<T> {
  let reply: Reply<T>;
  try {
    reply = await call(session.registry);
  } catch (err) {
    if (err instanceof Unreachable) throw failures.registryUnreachable(session.registry.baseUrl, err.reason);
    throw err;
  }
  if ("ok" in reply) return reply.ok;
  throw failures.refused(action, reply.refused, hintFor(reply.refused, subject, session));
}

/** What to do about each error code of spec §4.5 (DESIGN §3). */
function hintFor(refusal: Refusal, { name, version }: { name?: string; version?: string }, { registry, source }: Session): string | null {
  switch (refusal.code) {
    case "UNAUTHENTICATED":
      return `The stack registry at ${registry.baseUrl} does not accept ${source}: it expired or was revoked. Run: core login`;
    case "FORBIDDEN":
      return "Creating, changing, publishing and deprecating templates need the stacks:publish permission, which operators have.";
    case "TEMPLATE_NOT_FOUND":
      return `There is no template named "${name}" at ${registry.baseUrl}: core stacks list shows the active ones.`;
    case "VERSION_NOT_FOUND":
      return `${name} has no version ${version}: core stacks versions ${name} lists them.`;
    case "TEMPLATE_EXISTS":
      return `Template names are unique and never change: core stacks show ${name} shows the existing one, core stacks update ${name} changes its texts.`;
    case "VERSION_EXISTS":
      return "Published versions never change: publish under a new version number.";
    case "TEMPLATE_DEPRECATED":
      return `${name} is deprecated and takes no new versions; make it active again first: core stacks update ${name} --reactivate`;
    case "PAYLOAD_TOO_LARGE":
      return "The stack definition is larger than the stack registry accepts: make it smaller.";
    case "RATE_LIMITED":
      return "Too many requests: wait a little and try again.";
    default:
      return null;
  }
}

function checkName(name: string) {
  if (!NAME.test(name)) throw failures.invalidArgument(`Invalid template name "${name}": 1-64 characters, lower-case letters, digits and hyphens`);
}

function checkSemver(value: string, what: string) {
  if (!SEMVER.test(value)) {
    throw failures.invalidArgument(`Invalid ${what} "${value}": expected MAJOR.MINOR.PATCH with an optional -suffix of letters, digits and dots (1.2.0, 2.0.0-rc.1)`);
  }
}

/** The definition file must exist and hold one JSON object (spec §4.5: stackDefinition is an object). */
async function readDefinition(path: string): Promise<Record<string, unknown>> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why = code === "ENOENT" ? "no such file" : code === "EISDIR" ? "it is a directory" : code === "EACCES" ? "permission denied" : (code ?? String(err));
    throw failures.invalidDefinition(`Cannot read the definition file ${path} (${why})`);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw failures.invalidDefinition(`The definition file ${path} is not valid JSON (${(err as Error).message})`);
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    const found = value === null ? "null" : Array.isArray(value) ? "an array" : `a ${typeof value}`;
    throw failures.invalidDefinition(`The definition file ${path} must hold a JSON object ({ … }), not ${found}`);
  }
  return value as Record<string, unknown>;
}

function arrayOf<T>(value: unknown, baseUrl: string): T[] {
  if (!Array.isArray(value)) throw failures.registryAnswerUnreadable(baseUrl);
  return value as T[];
}
