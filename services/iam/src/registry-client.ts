import { ApiError, conflict, fetchTraced, notFound, serviceUnreachable, tracingFor, type TraceSource } from "@core/kit";
import { readAgainOnReset, type ServiceTokenSource } from "@core/service-auth";

export interface PlatformRecord {
  id: string;
  name: string;
  slug: string;
  status: "active" | "suspended";
  tier: string;
}

/**
 * IAM's calls to the platform registry's HTTP API, with service tokens (DESIGN §1, §7). Each call
 * joins `from`, the trace of the request it serves; without one (the set-up sweeper) it starts a
 * trace of its own (DESIGN §10).
 */
export class RegistryClient {
  constructor(
    private readonly baseUrl: string,
    private readonly tokens: ServiceTokenSource,
    private readonly doFetch: typeof fetch = fetch,
  ) {}

  createPlatform(input: { name: string; slug: string; tier: string }, from?: TraceSource): Promise<PlatformRecord> {
    return this.call("POST", "/platforms", input, from);
  }

  /** The platform with this slug, or null (IAM finishing an interrupted org setup). */
  async findPlatformBySlug(slug: string, from?: TraceSource): Promise<PlatformRecord | null> {
    const page = await this.call<{ data: PlatformRecord[] }>("GET", `/platforms?slug=${encodeURIComponent(slug)}&limit=1`, undefined, from);
    return page.data[0] ?? null;
  }

  setStatus(platformId: string, status: "active" | "suspended", from?: TraceSource): Promise<PlatformRecord> {
    return this.call("PATCH", `/platforms/${encodeURIComponent(platformId)}`, { status }, from);
  }

  private async call<T = PlatformRecord>(method: string, path: string, body: object | undefined, from: TraceSource = tracingFor("iam")): Promise<T> {
    const ask = async () =>
      fetchTraced(from, this.doFetch, `${this.baseUrl}${path}`, {
        method,
        headers: { "content-type": "application/json", authorization: `Bearer ${await this.tokens.tokenFor("platform-registry", from)}` },
        ...(body ? { body: JSON.stringify(body) } : {}),
        signal: AbortSignal.timeout(10_000),
      });
    let response: Response;
    try {
      // a read is asked again when its connection is reset; a write is not (org set-up recovers it)
      response = await (method === "GET" ? readAgainOnReset(ask) : ask());
    } catch {
      throw serviceUnreachable("The platform registry");
    }
    if (response.ok) return (await response.json()) as T;
    const answer = (await response.json().catch(() => null)) as { error?: { code?: string; message?: string } } | null;
    if (response.status === 409) throw conflict(answer?.error?.code ?? "CONFLICT", answer?.error?.message ?? "Conflict in the platform registry");
    if (response.status === 404) throw notFound(answer?.error?.message ?? "No such platform");
    // the registry's own refusal to change a suspended platform, not a failure of the registry
    if (response.status === 403 && answer?.error?.code === "PLATFORM_SUSPENDED") {
      throw new ApiError(403, "PLATFORM_SUSPENDED", answer.error.message ?? "The platform is suspended");
    }
    throw new ApiError(502, "UPSTREAM_UNAVAILABLE", `The platform registry answered ${response.status}`);
  }
}
