import { fetchTraced, serviceUnavailable, serviceUnreachable, tracingFor, upstreamUnavailable, UPSTREAM_RETRY_AFTER_SECONDS, type TraceSource } from "@core/kit";

/** Something that hands out service tokens for a target service (DESIGN §4). */
export interface ServiceTokenSource {
  /** `from`: the trace of the request that needs it (a token fetched from IAM is a call in it) */
  tokenFor(targetService: string, from?: TraceSource): Promise<string>;
}

export interface ServiceCredential {
  serviceId: string;
  secret: string;
}

/**
 * Obtains service tokens from IAM (`POST /api/core/service-token`, Basic auth with the service's
 * own id and secret) and reuses each until shortly before it expires.
 */
export class ServiceTokenClient implements ServiceTokenSource {
  private readonly tokens = new Map<string, { token: string; until: number }>();
  private readonly inFlight = new Map<string, Promise<string>>();

  constructor(
    private readonly iamUrl: string,
    private readonly credential: ServiceCredential,
    private readonly doFetch: typeof fetch = fetch,
  ) {}

  async tokenFor(targetService: string, from?: TraceSource): Promise<string> {
    const held = this.tokens.get(targetService);
    if (held && held.until > Date.now()) return held.token;
    const pending = this.inFlight.get(targetService);
    if (pending) return pending;
    const request = this.request(targetService, from ?? tracingFor(this.credential.serviceId)).finally(() => this.inFlight.delete(targetService));
    this.inFlight.set(targetService, request);
    return request;
  }

  private async request(targetService: string, from: TraceSource): Promise<string> {
    const basic = Buffer.from(`${this.credential.serviceId}:${this.credential.secret}`).toString("base64");
    let response: Response;
    try {
      response = await fetchTraced(from, this.doFetch, `${this.iamUrl.replace(/\/+$/, "")}/api/core/service-token`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Basic ${basic}` },
        body: JSON.stringify({ serviceId: this.credential.serviceId, targetService }),
        signal: AbortSignal.timeout(5_000),
      });
    } catch {
      throw serviceUnreachable("IAM");
    }
    if (response.status >= 500) throw serviceUnavailable("IAM", response);
    if (response.status !== 200) throw upstreamUnavailable(`IAM refused a service token (${response.status})`, UPSTREAM_RETRY_AFTER_SECONDS);
    const body = (await response.json()) as { token: string; expiresIn: number };
    // renew 30 s early so a token never expires in flight
    this.tokens.set(targetService, { token: body.token, until: Date.now() + Math.max(0, body.expiresIn - 30) * 1000 });
    return body.token;
  }
}

/** `CORE_SERVICE_CREDENTIALS` (`id:secret,id:secret`) as a map of id → secret. */
export function parseServiceCredentials(value: string | undefined): Map<string, string> {
  const map = new Map<string, string>();
  for (const pair of (value ?? "").split(",")) {
    const trimmed = pair.trim();
    if (!trimmed) continue;
    const at = trimmed.indexOf(":");
    if (at <= 0 || at === trimmed.length - 1) {
      throw new Error("CORE_SERVICE_CREDENTIALS must be a comma-separated list of id:secret pairs");
    }
    map.set(trimmed.slice(0, at), trimmed.slice(at + 1));
  }
  return map;
}
