import { AUDIENCE } from "./credentials.js";
import { policyHoldOf, type PolicyHold } from "./failures.js";
import { callService, postForm, Unreachable, type Answer, type Reply } from "./http.js";

export const CLIENT_ID = AUDIENCE;
const DEVICE_CODE_GRANT = "urn:ietf:params:oauth:grant-type:device_code";

/** The device code response (spec §2.2), with RFC 8628 §3.3.1's `verification_uri_complete`. */
export interface DeviceCode {
  device_code: string;
  user_code: string;
  verification_uri: string;
  verification_uri_complete?: string;
  expires_in: number;
  interval: number;
}

/** The token response (spec §2.2). */
export interface Tokens {
  access_token: string;
  token_type: string;
  expires_in: number;
  refresh_token: string;
}

/** The identity response of `POST /api/v1/cli/whoami` (spec §2.2). */
export interface Identity {
  email: string;
  platformId: string;
  role: string;
  expiresAt: string;
}

/** Tokens, or an RFC 6749 §5.2 error; an answer that is neither has `error` "HTTP <status>". */
export type TokenAnswer = { tokens: Tokens } | { error: string; description?: string; status: number };

/** Who a token stands for, or the error envelope's code and message (spec §2.3, §7.1). */
export type WhoamiAnswer = { identity: Identity } | { status: number; code: string; message: string };

/** The IAM routes the CLI calls (spec §4.3), at one IAM base address. Throws `Unreachable`. */
export class IamClient {
  constructor(
    readonly iamUrl: string,
    private readonly options: { userAgent: string; debug: (line: string) => void },
  ) {}

  /** RFC 8628 §3.1. The caller decides what a non-2xx answer means (spec §7.4). */
  async requestDeviceCode(): Promise<{ status: number; deviceCode: DeviceCode | null }> {
    const answer = await this.post("/oauth/device/code", { client_id: CLIENT_ID });
    const body = answer.body as Partial<DeviceCode> | null;
    const valid =
      typeof body?.device_code === "string" &&
      typeof body.user_code === "string" &&
      typeof body.verification_uri === "string" &&
      typeof body.interval === "number";
    return { status: answer.status, deviceCode: answer.status === 200 && valid ? (body as DeviceCode) : null };
  }

  /** RFC 8628 §3.4: one poll. */
  async pollDeviceToken(deviceCode: string): Promise<TokenAnswer> {
    return tokenAnswer(await this.post("/oauth/device/token", { grant_type: DEVICE_CODE_GRANT, device_code: deviceCode, client_id: CLIENT_ID }));
  }

  /** RFC 6749 §6: new tokens for a refresh token, which IAM rotates (spec §5.6). */
  async refresh(refreshToken: string): Promise<TokenAnswer> {
    return tokenAnswer(await this.post("/oauth/token", { grant_type: "refresh_token", refresh_token: refreshToken, client_id: CLIENT_ID }));
  }

  /** RFC 7009 §2.1: the HTTP status (200 also for a token IAM no longer knows). */
  async revoke(token: string, hint: "refresh_token" | "access_token"): Promise<number> {
    return (await this.post("/oauth/revoke", { token, token_type_hint: hint, client_id: CLIENT_ID })).status;
  }

  async whoami(token: string): Promise<WhoamiAnswer> {
    const answer = await this.post("/api/v1/cli/whoami", null, token);
    const body = answer.body;
    if (answer.status === 200 && typeof body?.email === "string") {
      return { identity: { email: body.email, platformId: String(body.platformId ?? ""), role: String(body.role ?? ""), expiresAt: String(body.expiresAt ?? "") } };
    }
    return { status: answer.status, code: String(body?.error?.code ?? `HTTP ${answer.status}`), message: String(body?.error?.message ?? "") };
  }

  /**
   * What holds a session back, if anything (ADR 0023): `GET /api/core/session`, one of the routes
   * IAM answers such a session, names the policy and its page. Null when nothing does or IAM does
   * not say. Throws `Unreachable`.
   */
  async policyHoldOf(token: string): Promise<PolicyHold | null> {
    const reply = await this.json<{ principal?: { restriction?: { code?: unknown; location?: unknown } } }>("GET", "/api/core/session", undefined, token);
    const restriction = "ok" in reply ? reply.ok.principal?.restriction : undefined;
    return restriction ? policyHoldOf({ policy: restriction.code, location: restriction.location }, this.iamUrl) : null;
  }

  /** A JSON route of IAM's own (`GET /api/core/memberships`, the library's set-active) with the credential. */
  json<T>(method: string, path: string, body: unknown, credential: string): Promise<Reply<T>> {
    return callService<T>(method, `${this.iamUrl}${path}`, body, 200, { credential, userAgent: this.options.userAgent, debug: this.options.debug });
  }

  private async post(path: string, form: Record<string, string> | null, credential?: string): Promise<Answer> {
    try {
      const answer = await postForm(`${this.iamUrl}${path}`, form, { credential, userAgent: this.options.userAgent });
      const error = answer.body?.error;
      this.options.debug(`POST ${this.iamUrl}${path} → ${answer.status}${typeof error === "string" ? ` ${error}` : ""}`);
      return answer;
    } catch (err) {
      if (err instanceof Unreachable) this.options.debug(`POST ${this.iamUrl}${path} → unreachable: ${err.reason}`);
      throw err;
    }
  }
}

function tokenAnswer(answer: Answer): TokenAnswer {
  const body = answer.body;
  if (answer.status === 200 && typeof body?.access_token === "string") return { tokens: body as Tokens };
  if (typeof body?.error === "string") return { error: body.error, description: body.error_description, status: answer.status };
  return { error: `HTTP ${answer.status}`, status: answer.status };
}
