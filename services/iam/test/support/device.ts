import { expect } from "vitest";
import { call, type Iam } from "./harness.js";

/** Sends an OAuth request the way standard clients do: a form body (or JSON with `json: true`). */
export async function oauth(iam: Iam, path: string, params: Record<string, string>, options: { json?: boolean; headers?: Record<string, string> } = {}) {
  const response = await iam.app.request(path, {
    method: "POST",
    headers: { "content-type": options.json ? "application/json" : "application/x-www-form-urlencoded", ...options.headers },
    body: options.json ? JSON.stringify(params) : new URLSearchParams(params).toString(),
  });
  return { status: response.status, headers: response.headers, body: (await response.json()) as Record<string, any> };
}

export const DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code";

export async function startDeviceLogin(iam: Iam) {
  const r = await oauth(iam, "/oauth/device/code", { client_id: "core-cli" });
  if (r.status !== 200) throw new Error(`device code refused: ${JSON.stringify(r.body)}`);
  return r.body as { device_code: string; user_code: string; verification_uri: string; verification_uri_complete: string; expires_in: number; interval: number };
}

export const pollToken = (iam: Iam, deviceCode: string, clientId = "core-cli") =>
  oauth(iam, "/oauth/device/token", { grant_type: DEVICE_GRANT, device_code: deviceCode, client_id: clientId });

export const refresh = (iam: Iam, refreshToken: string) =>
  oauth(iam, "/oauth/token", { grant_type: "refresh_token", refresh_token: refreshToken, client_id: "core-cli" });

/** A CLI login approved by `approver`'s session: the CLI's access and refresh tokens. */
export async function cliLoginApprovedBy(iam: Iam, approver: { token: string }) {
  const started = await startDeviceLogin(iam);
  const approved = await call(iam, "POST", "/oauth/device/authorize", { token: approver.token, body: { user_code: started.user_code } });
  expect(approved.status, JSON.stringify(approved.body)).toBe(200);
  const tokens = await pollToken(iam, started.device_code);
  expect(tokens.status, JSON.stringify(tokens.body)).toBe(200);
  return tokens.body as { access_token: string; refresh_token: string };
}
