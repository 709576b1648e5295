import { AsyncLocalStorage } from "node:async_hooks";
import { Dispatcher, fetch, getGlobalDispatcher, setGlobalDispatcher, type Agent } from "undici";
import { ApiError } from "@core/kit";
import { guardedAddresses, namesPrivateAddress, PrivateAddressRefused, webhookAgent } from "@core/webhooks";
import type { SsoProviderConfig } from "./config.js";

/**
 * Every connection IAM makes to an organization's identity provider (ADR 0026, amendment of issue
 * 35): any https origin whose name resolves to a public address, narrowed to the operator's list
 * when `CORE_SSO_PROVIDER_ORIGINS` is set; http, loopback and private addresses only with
 * `CORE_IAM_SSO_ALLOW_PRIVATE=1`. Each connection goes through the webhooks' SSRF guard, whose lookup
 * is the one the socket connects with, so a name that changes its answer between a check and the
 * connection cannot reach inside (docs/vault/cross-cutting/security.md).
 *
 * The SSO plugin offers no option for the fetch it uses (global `fetch`, through `@better-fetch` and
 * jose's remote key set), and it talks only to providers it trusts. So:
 * - IAM reads the discovery document itself, through the guard, before a provider is stored, and
 *   stores the endpoints it found (the plugin's `skipDiscovery`);
 * - IAM's calls into the plugin's sign-in start and callback run `inProviderScope`: for that call
 *   only, the plugin trusts the provider's origins (its check of endpoint hosts is this one) and the
 *   process's HTTP dispatcher sends connections to those origins through the guard. Outside a scope
 *   nothing changes: the library's trusted origins stay IAM's own and the operator's.
 */

/** What IAM found in a provider's discovery document (OpenID Connect Discovery 1.0 §3), named as the plugin stores it. */
export interface DiscoveredProvider {
  /** the issuer as the provider writes it: id tokens carry exactly this `iss` */
  issuer: string;
  discoveryEndpoint: string;
  authorizationEndpoint: string;
  tokenEndpoint: string;
  jwksEndpoint: string;
  userInfoEndpoint?: string;
  tokenEndpointAuthentication: "client_secret_basic" | "client_secret_post";
}

/** The addresses of a discovery document IAM reads, with the words a refusal names them by. */
const ENDPOINTS = [
  ["authorization_endpoint", "authorizationEndpoint", "authorization endpoint"],
  ["token_endpoint", "tokenEndpoint", "token endpoint"],
  ["jwks_uri", "jwksEndpoint", "key set (jwks_uri)"],
  ["userinfo_endpoint", "userInfoEndpoint", "userinfo endpoint"],
] as const;
const REQUIRED = new Set<string>(["authorization_endpoint", "token_endpoint", "jwks_uri"]);

/** Discovery documents are a few kilobytes; a provider's with many extensions stays far below this. */
const MAX_DOCUMENT_BYTES = 100 * 1024;

const trimSlash = (url: string) => url.replace(/\/+$/, "");
const originOf = (address: unknown): string | null => {
  try {
    return new URL(String(address)).origin;
  } catch {
    return null;
  }
};

/** A refusal of a provider's address: 400 in the envelope, naming why and nothing the name resolved to. */
const refused = (message: string) => new ApiError(400, "VALIDATION_ERROR", message, [{ path: "issuer", message, code: "custom" }]);
const invalid = (message: string) => new ApiError(422, "INVALID_SSO_PROVIDER", message);
const unreachable = (message: string) => new ApiError(502, "UPSTREAM_UNAVAILABLE", message);

/** The provider's origins for one call into the plugin, and the guarded agent its connections there go through. */
interface ProviderScope {
  agent: Agent;
  origins: ReadonlySet<string>;
}
const scopes = new AsyncLocalStorage<ProviderScope>();

/**
 * The process's HTTP dispatcher while IAM runs: a connection to an origin of the provider whose
 * scope the call is in goes through that scope's guarded agent, anything else through the
 * dispatcher that was there before, unchanged.
 */
class ProviderRouting extends Dispatcher {
  constructor(private readonly fallback: Dispatcher) {
    super();
  }

  override dispatch(options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
    const scope = scopes.getStore();
    const origin = scope ? originOf(options.origin) : null;
    return (scope && origin && scope.origins.has(origin) ? scope.agent : this.fallback).dispatch(options, handler);
  }

  override close(...args: unknown[]): never {
    return (this.fallback.close as (...a: unknown[]) => never)(...args);
  }

  override destroy(...args: unknown[]): never {
    return (this.fallback.destroy as (...a: unknown[]) => never)(...args);
  }
}

/** Puts the routing in place, again if something replaced it since (it is checked before every scope). */
function ensureRouting() {
  const current = getGlobalDispatcher();
  if (!(current instanceof ProviderRouting)) setGlobalDispatcher(new ProviderRouting(current));
}

/**
 * The library's trusted origins (its `trustedOrigins` option): IAM's own and the operator's, and,
 * during a request IAM makes inside a provider scope, that provider's origins. The library asks
 * without a request once, when it starts: that answer, which direct `auth.api` calls use, never
 * includes a provider.
 */
export function trustedOriginsWithProviderScope(trusted: readonly string[]) {
  return (request?: Request): string[] => (request ? [...trusted, ...(scopes.getStore()?.origins ?? [])] : [...trusted]);
}

export class SsoConnections {
  private readonly agent: Agent;

  constructor(private readonly config: SsoProviderConfig) {
    // the plugin's requests carry no time limit of their own: a provider that hangs does not hold a sign-in for minutes
    this.agent = webhookAgent({ allowPrivate: config.allowPrivate, resolve: config.resolve, ca: config.ca, timeoutMs: config.timeoutMs });
  }

  /**
   * Why `address` may not be one of a provider's, judged without connecting: not https (http only
   * with the setting), carrying credentials, outside the operator's list, or naming a loopback or
   * private address itself. Null when it may; its name is looked up when IAM connects.
   */
  refusalOf(address: string, label: string): string | null {
    let url: URL;
    try {
      url = new URL(address);
    } catch {
      return `The provider's ${label} is not an address`;
    }
    if (url.protocol !== "https:" && !(url.protocol === "http:" && this.config.allowPrivate)) return `The provider's ${label} must be an https address; ${trimSlash(url.origin)} is not (http only with CORE_IAM_SSO_ALLOW_PRIVATE=1)`;
    if (url.username || url.password) return `The provider's ${label} must not carry a user name or password`;
    if (this.config.origins && !this.config.origins.includes(url.origin)) return `${url.origin} is not among the identity provider origins this service allows (CORE_SSO_PROVIDER_ORIGINS)`;
    if (!this.config.allowPrivate && namesPrivateAddress(url.hostname)) return privateRefusal(url.hostname, false);
    return null;
  }

  /** `refusalOf`, then the name's addresses as the guard looks them up: each address of a provider is checked before it is stored. */
  async checkAddress(address: string, label: string): Promise<void> {
    const refusal = this.refusalOf(address, label);
    if (refusal) throw refused(refusal);
    const { hostname } = new URL(address);
    try {
      await guardedAddresses(hostname, { allowPrivate: this.config.allowPrivate, resolve: this.config.resolve });
    } catch (err) {
      if (err instanceof PrivateAddressRefused) throw refused(privateRefusal(hostname, true));
      throw unreachable(`The provider's ${label} could not be reached: its name ${hostname} has no address`);
    }
  }

  /**
   * Reads the issuer's discovery document (OpenID Connect Discovery 1.0 §4) through the guard: no
   * redirect followed, JSON of at most 100 KB within the time limit, naming the issuer asked for,
   * with every endpoint IAM or the browser will use allowed by the same rule. Refusals: 400 for an
   * address not allowed, 422 for a document that is not a provider's, 502 when it cannot be read.
   */
  async discover(issuer: string): Promise<DiscoveredProvider> {
    await this.checkAddress(issuer, "issuer");
    const discoveryEndpoint = `${trimSlash(issuer)}/.well-known/openid-configuration`;
    const document = await this.fetchDocument(discoveryEndpoint);
    const named = document.issuer;
    // §4.3: the issuer the document names is the one asked for (a trailing slash aside, as the plugin compares)
    if (typeof named !== "string" || trimSlash(named) !== trimSlash(issuer)) {
      throw invalid(`The discovery document names the issuer ${JSON.stringify(String(named ?? "")).slice(0, 200)}, not ${issuer}`);
    }
    const endpoints: Partial<Record<(typeof ENDPOINTS)[number][1], string>> = {};
    for (const [field, name, label] of ENDPOINTS) {
      const value = document[field];
      if (value === undefined && !REQUIRED.has(field)) continue;
      if (typeof value !== "string" || originOf(value) === null || !/^https?:/i.test(value)) throw invalid(`The discovery document gives no usable ${label} (${field})`);
      await this.checkAddress(value, label);
      endpoints[name] = value;
    }
    return {
      issuer: named,
      discoveryEndpoint,
      authorizationEndpoint: endpoints.authorizationEndpoint!,
      tokenEndpoint: endpoints.tokenEndpoint!,
      jwksEndpoint: endpoints.jwksEndpoint!,
      ...(endpoints.userInfoEndpoint && { userInfoEndpoint: endpoints.userInfoEndpoint }),
      tokenEndpointAuthentication: clientAuthentication(document.token_endpoint_auth_methods_supported),
    };
  }

  /**
   * Runs `call` (a request into the SSO plugin's sign-in start or callback) in the scope of a
   * provider at `addresses`: the plugin trusts their origins for this call only, and its
   * connections to them go through the guard.
   */
  inProviderScope<T>(addresses: readonly string[], call: () => Promise<T>): Promise<T> {
    ensureRouting();
    const origins = new Set(addresses.map(originOf).filter((o): o is string => o !== null));
    return scopes.run({ agent: this.agent, origins }, call);
  }

  /** One GET of the discovery document: the guard's refusal is a 400, a provider that does not answer a 502, a wrong answer a 422. */
  private async fetchDocument(url: string): Promise<Record<string, unknown>> {
    const seconds = Math.round(this.config.timeoutMs / 1000);
    let response;
    try {
      response = await fetch(url, { dispatcher: this.agent, redirect: "manual", headers: { accept: "application/json" }, signal: AbortSignal.timeout(this.config.timeoutMs) });
    } catch (err) {
      const cause = (err as { cause?: Error & { code?: string } }).cause;
      if (cause instanceof PrivateAddressRefused) throw refused(privateRefusal(new URL(url).hostname, true));
      if ((err as Error).name === "TimeoutError") throw unreachable(`The identity provider did not answer within ${seconds} s`);
      throw unreachable(`The identity provider could not be reached (${cause?.code ?? "no connection"})`);
    }
    try {
      if (response.status >= 300 && response.status < 400) throw invalid("The issuer's discovery document answered with a redirect, which IAM does not follow: give the issuer exactly as the provider names itself");
      if (response.status >= 500) throw unreachable(`The identity provider answered ${response.status} for its discovery document`);
      if (response.status !== 200) throw invalid(`The issuer's discovery document (${url}) answered ${response.status}`);
      const text = await readAtMost(response.body, MAX_DOCUMENT_BYTES);
      if (text === null) throw invalid(`The issuer's discovery document is larger than ${MAX_DOCUMENT_BYTES / 1024} KB`);
      let document: unknown;
      try {
        document = JSON.parse(text);
      } catch {
        throw invalid("The issuer's discovery document is not JSON");
      }
      if (typeof document !== "object" || document === null || Array.isArray(document)) throw invalid("The issuer's discovery document is not a JSON object");
      return document as Record<string, unknown>;
    } catch (err) {
      if ((err as Error).name === "TimeoutError" || (err as Error).name === "AbortError") throw unreachable(`The identity provider did not answer within ${seconds} s`);
      throw err;
    } finally {
      await response.body?.cancel().catch(() => undefined);
    }
  }
}

function privateRefusal(hostname: string, looked: boolean): string {
  const what = looked && !namesPrivateAddress(hostname) ? `${hostname} resolves to a loopback or private address` : `${hostname} is a loopback or private address`;
  return `${what}; IAM connects to identity providers there only with CORE_IAM_SSO_ALLOW_PRIVATE=1`;
}

/** How IAM authenticates to the token endpoint (OpenID Connect Discovery 1.0 §3: absent means client_secret_basic). */
function clientAuthentication(supported: unknown): DiscoveredProvider["tokenEndpointAuthentication"] {
  if (supported === undefined) return "client_secret_basic";
  const methods = Array.isArray(supported) ? supported : [];
  if (methods.includes("client_secret_basic")) return "client_secret_basic";
  if (methods.includes("client_secret_post")) return "client_secret_post";
  throw invalid("The provider's token endpoint takes neither client_secret_basic nor client_secret_post, the ways IAM authenticates with a client secret");
}

/** The body as text, or null once it passes `limit` bytes (a missing or false Content-Length changes nothing). */
async function readAtMost(body: AsyncIterable<Uint8Array> | null, limit: number): Promise<string | null> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of body ?? []) {
    size += chunk.byteLength;
    if (size > limit) return null;
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString("utf8");
}
