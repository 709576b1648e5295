import { randomBytes } from "node:crypto";
import { createServer, request as httpRequest, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ServiceName } from "@core/kit";
import { call, cookiesOf, createApiKey, operator, PASSWORD, serviceToken, signIn, signUp, uniqueEmail, type Iam } from "../services/iam/test/support/harness.js";
import { pollToken, refresh, startDeviceLogin } from "../services/iam/test/support/device.js";
import { hiddenFields, PageBrowser } from "../services/iam/test/support/pages.js";
import { authorizeAddress, exchangeCode, pkcePair, refreshGrant, registerClient } from "../services/iam/test/support/authorization-code.js";
import { secretOfUri, totp } from "../services/iam/test/support/totp.js";
import { launch, replicaPorts, SERVICE_NAMES, type Launched } from "./support/launched.js";
import { startCollector } from "./support/otlp-collector.js";

/**
 * Logs never carry a credential (docs/vault/cross-cutting/security.md#Logs): the whole system as
 * `npm start` runs it, every service logging at debug level and exporting its spans over OTLP,
 * walked through every flow that makes a secret (sessions and their cookies, passwords, API keys,
 * magic, verification, reset and invitation links, device and user codes, CLI and OAuth tokens, an
 * OAuth code and state, service tokens, two-factor secrets and backup codes, portal sessions and
 * their links, a card's setup secret, webhook signing secrets, the data directory's own secrets),
 * then each secret-bearing address asked again with the secret in its path and in a query string.
 * Every line the process wrote (all services, all levels, stdout and stderr) and every span
 * exported is then searched for every secret collected.
 */

const SERVICE = { id: "log-check", secret: `log-check-${randomBytes(24).toString("base64url")}` };

/**
 * IAM over real HTTP, in the shape of the IAM test harness, so its helpers drive the launched IAM.
 * Sent with node:http rather than fetch, which marks every request as a script's (`Sec-Fetch-Mode:
 * cors`) whatever it is told: a browser's navigation must be one.
 */
function iamAt(url: string): Iam {
  const request = (path: string, init: { method?: string; headers?: Record<string, string>; body?: string } = {}) =>
    new Promise<Response>((resolve, reject) => {
      const sent = httpRequest(new URL(path, url), { method: init.method ?? "GET", headers: init.headers }, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (chunk: Buffer) => chunks.push(chunk));
        res.on("end", () => {
          const headers = new Headers();
          for (const [name, value] of Object.entries(res.headers)) for (const one of [value ?? []].flat()) headers.append(name, one);
          const body = [204, 304].includes(res.statusCode!) ? null : Buffer.concat(chunks);
          resolve(new Response(body, { status: res.statusCode, headers }));
        });
      });
      sent.on("error", reject);
      sent.end(init.body);
    });
  return { app: { request }, origin: new URL(url).origin } as unknown as Iam;
}

/** Every mail the services wrote to the data directory's outbox (no SMTP_URL), oldest first. */
function outbox(dataDir: string): { to: string; subject: string; text: string }[] {
  const dir = join(dataDir, "outbox");
  let files: string[];
  try {
    files = readdirSync(dir).sort();
  } catch {
    return [];
  }
  return files.map((file) => {
    const raw = readFileSync(join(dir, file), "utf8");
    const [head, ...body] = raw.split("\n\n");
    const field = (name: string) => new RegExp(`^${name}: (.*)$`, "m").exec(head!)?.[1] ?? "";
    return { to: field("To"), subject: field("Subject"), text: body.join("\n\n") };
  });
}

const linksIn = (text: string) => [...text.matchAll(/https?:\/\/\S+/g)].map((m) => new URL(m[0]));


/** A local receiver for webhook deliveries, so no delivery looks up a name outside. */
async function startReceiver(): Promise<{ url: string; close(): Promise<void> }> {
  const server: Server = createServer((req, res) => {
    req.resume();
    req.on("end", () => res.writeHead(200).end("ok"));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

describe("no credential in any log line or span of a whole run of npm start", { timeout: 240_000 }, () => {
  const dataDir = mkdtempSync(join(tmpdir(), "core-log-secrets-"));
  let launched: Launched;
  let collector: Awaited<ReturnType<typeof startCollector>>;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let urls: Record<ServiceName, string>;
  /** what each secret is → the secret; never printed */
  const secrets = new Map<string, string>();
  /** ids that are not secrets, which the log must keep readable */
  const ids = new Map<string, string>();
  const keep = (what: string, value: string | null | undefined) => {
    expect(value, `${what}: the flow did not give one`).toBeTruthy();
    // shorter values could turn up in a log by chance (a time stamp's digits), not by a leak
    expect(value!.length, `${what} is too short to search for`).toBeGreaterThanOrEqual(8);
    secrets.set(secrets.has(what) ? `${what} #${secrets.size}` : what, value!);
    return value!;
  };

  beforeAll(async () => {
    [collector, receiver] = [await startCollector(), await startReceiver()];
    const ports = await replicaPorts(1);
    urls = Object.fromEntries(SERVICE_NAMES.map((name) => [name, ports.url(name, 0)])) as Record<ServiceName, string>;
    launched = launch({
      ...ports.env,
      CORE_IAM_URL: urls.iam,
      CORE_BILLING_URL: urls.billing,
      CORE_STACK_REGISTRY_URL: urls["stack-registry"],
      CORE_PLATFORM_REGISTRY_URL: urls["platform-registry"],
      CORE_VAULT_URL: `${urls.vault}/mcp`,
      CORE_DATA_DIR: dataDir,
      LOG_LEVEL: "debug",
      // limits have their own tests; here a 429 would only cut a flow short
      CORE_RATE_LIMIT: "off",
      CORE_SERVICE_CREDENTIALS: `${SERVICE.id}:${SERVICE.secret}`,
      OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
      OTEL_BSP_SCHEDULE_DELAY: "200",
    });
    await launched.running;
  }, 180_000);

  afterAll(async () => {
    await launched?.stop();
    await collector?.close();
    await receiver?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("walks every flow that makes a secret, and asks each secret-bearing address with its secret in the path and the query", async () => {
    const iam = iamAt(urls.iam);
    const mails = (to: string, subject: RegExp) => outbox(dataDir).filter((m) => m.to === to && subject.test(m.subject));
    const mailLink = (to: string, subject: RegExp) => {
      const mail = mails(to, subject).at(-1);
      expect(mail, `a mail to ${to} matching ${subject}`).toBeDefined();
      return linksIn(mail!.text)[0]!;
    };
    const json = async (response: Response) => ({ status: response.status, body: (await response.json().catch(() => null)) as any, headers: response.headers });
    const at = (service: ServiceName, path: string, init: RequestInit = {}) => fetch(`${urls[service]}${path}`, { redirect: "manual", ...init });
    const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
    const jsonBody = (body: unknown, headers: Record<string, string> = {}) => ({ method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) });
    /** the secret-bearing requests of the last step, answered without a 5xx */
    const ask = async (service: ServiceName, path: string, init: RequestInit = {}) => {
      const response = await at(service, path, init);
      await response.body?.cancel();
      expect(response.status, `${service} ${init.method ?? "GET"} ${path.slice(0, 40)}…`).toBeLessThan(500);
      return response;
    };

    // the data directory's own secrets: the auth secret and the built-in service credentials
    for (const file of readdirSync(dataDir).filter((f) => f.endsWith(".secret"))) keep(`data directory ${file}`, readFileSync(join(dataDir, file), "utf8").trim());
    keep("service credential from the environment", SERVICE.secret);

    // people: an operator, a tenant's owner with an organization and its platform
    keep("password", PASSWORD);
    const op = await operator(iam);
    keep("operator session token", op.token);
    keep("operator session cookie", op.cookie.split("=")[1]);
    const owner = await signUp(iam, uniqueEmail("owner"));
    keep("session token", owner.token);
    keep("session cookie", owner.cookie.split("=")[1]);
    keep("session cookie, decoded", decodeURIComponent(owner.cookie.split("=")[1]!));
    const setup = await json(await at("iam", "/api/core/org-setup", jsonBody({ name: "Log check", slug: `log-check-${Date.now().toString(36)}` }, { cookie: owner.cookie, origin: urls.iam })));
    expect(setup.status, JSON.stringify(setup.body)).toBe(201);
    const { orgId, platformId } = setup.body as { orgId: string; platformId: string };
    ids.set("organization", orgId).set("platform", platformId);
    const wrong = `wrong-password-${randomBytes(6).toString("hex")}`;
    keep("wrong password", wrong);
    expect((await call(iam, "POST", "/api/auth/sign-in/email", { headers: { origin: iam.origin }, body: { email: owner.email, password: wrong } })).status).toBe(401);
    const again = await signIn(iam, owner);
    keep("second session token", again.token);

    // the address confirmation link of the owner's sign-up, followed
    const verification = mailLink(owner.email, /Confirm your email/);
    keep("verification token", verification.searchParams.get("token"));
    keep("verification link", verification.href);
    await ask("iam", verification.pathname + verification.search, { headers: { cookie: owner.cookie } });

    // a password reset: asked, its link's library route and page, then the new password
    const resetting = await signUp(iam, uniqueEmail("reset"));
    expect((await call(iam, "POST", "/api/auth/request-password-reset", { body: { email: resetting.email, redirectTo: "/reset-password" } })).status).toBe(200);
    const resetLink = mailLink(resetting.email, /password/i);
    const resetToken = keep("reset token", resetLink.searchParams.get("token"));
    keep("reset link", resetLink.href);
    expect((await ask("iam", `/api/auth/reset-password/${resetToken}?callbackURL=%2Freset-password`)).status).toBe(302);
    await ask("iam", resetLink.pathname + resetLink.search);
    const newPassword = keep("new password", `new-password-${randomBytes(8).toString("hex")}`);
    expect((await call(iam, "POST", "/api/auth/reset-password", { body: { token: resetToken, newPassword } })).status).toBe(200);
    keep("session after the reset", (await signIn(iam, resetting, newPassword)).token);

    // a magic link, asked and followed
    const magicEmail = uniqueEmail("magic");
    expect((await call(iam, "POST", "/api/auth/sign-in/magic-link", { body: { email: magicEmail } })).status).toBe(200);
    const magic = mailLink(magicEmail, /sign-in link/);
    const magicToken = keep("magic-link token", magic.searchParams.get("token"));
    keep("magic link", magic.href);
    expect((await ask("iam", magic.pathname + magic.search)).status).toBe(302);

    // an invitation: made, its mailed link opened by the invitee, accepted
    const invitee = await signUp(iam, uniqueEmail("invitee"));
    const invited = await call(iam, "POST", `/api/core/organizations/${orgId}/invitations`, { token: owner.token, body: { email: invitee.email, role: "member" } });
    expect(invited.status, JSON.stringify(invited.body)).toBe(201);
    const invitationId = keep("invitation id", invited.body.id);
    keep("invitation link", mailLink(invitee.email, /invit/i).href);
    await ask("iam", `/invitations/${invitationId}`, { headers: { cookie: invitee.cookie } });
    await ask("iam", `/api/core/organizations/${orgId}/invitations/${invitationId}`, { headers: bearer(owner.token) });
    expect((await call(iam, "POST", "/api/auth/organization/accept-invitation", { token: invitee.token, headers: { origin: iam.origin }, body: { invitationId } })).status).toBe(200);

    // API keys: made, used at IAM and at a registry (which asks IAM), a guessed one refused
    const { key } = await createApiKey(iam, owner);
    keep("API key", key);
    expect((await call(iam, "POST", "/api/v1/cli/whoami", { headers: { "x-api-key": key } })).status).toBe(200);
    expect((await ask("platform-registry", "/platforms", { headers: { "x-api-key": key } })).status).toBe(200);
    const guessed = keep("guessed API key", `core_${randomBytes(32).toString("base64url")}`);
    expect((await ask("platform-registry", "/platforms", { headers: { "x-api-key": guessed } })).status).toBe(401);

    // service tokens, minted with a service credential and used at a registry
    keep("service token for IAM", await serviceToken(iam, SERVICE.id, SERVICE.secret, "iam"));
    const registryToken = keep("service token for the registry", await serviceToken(iam, SERVICE.id, SERVICE.secret, "platform-registry"));
    await ask("platform-registry", "/platforms", { headers: bearer(registryToken) });

    // a device (CLI) login: its page with the user code, approval, the tokens and a refresh
    const device = await startDeviceLogin(iam);
    keep("device code", device.device_code);
    const userCode = keep("user code", device.user_code);
    keep("verification address with the user code", device.verification_uri_complete);
    const deviceBrowser = new PageBrowser(iam, owner.cookie);
    expect((await deviceBrowser.get(`/device?user_code=${encodeURIComponent(userCode)}`)).status).toBe(200);
    expect((await call(iam, "POST", "/oauth/device/authorize", { token: owner.token, body: { user_code: userCode } })).status).toBe(200);
    const cli = await pollToken(iam, device.device_code);
    expect(cli.status, JSON.stringify(cli.body)).toBe(200);
    keep("CLI access token", cli.body.access_token);
    keep("CLI refresh token", cli.body.refresh_token);
    const refreshed = await refresh(iam, cli.body.refresh_token);
    expect(refreshed.status).toBe(200);
    const cliToken = keep("refreshed CLI access token", refreshed.body.access_token);
    keep("refreshed CLI refresh token", refreshed.body.refresh_token);
    await ask("stack-registry", "/api/v1/stacks", { headers: bearer(cliToken) });

    // an MCP client: registered, the owner's consent through the pages, the code exchanged and refreshed, the vault read
    const vaultResource = `${urls.vault}/mcp`;
    const registered = await registerClient(iam);
    expect(registered.status, JSON.stringify(registered.body)).toBeLessThan(300);
    const clientId = registered.body.client_id as string;
    const pkce = pkcePair();
    keep("PKCE code verifier", pkce.verifier);
    const state = keep("OAuth state", `state-${randomBytes(12).toString("base64url")}`);
    // a browser's navigation (fetch would be answered in JSON)
    const consenting = new PageBrowser(iam, owner.cookie);
    const asked = await consenting.get(authorizeAddress({ clientId, resource: vaultResource, challenge: pkce.challenge, state }), { "sec-fetch-mode": "navigate", accept: "text/html" });
    expect(asked.status, asked.html).toBe(302);
    const consentPage = await consenting.get(asked.location!);
    expect(consentPage.status, consentPage.html).toBe(200);
    const consented = await consenting.post("/oauth/consent", { ...hiddenFields(consentPage.html, "/oauth/consent"), decision: "allow" });
    expect(consented.status, consented.html).toBe(303);
    const code = keep("OAuth authorization code", new URL(consented.location!).searchParams.get("code"));
    const granted = await exchangeCode(iam, clientId, code, pkce.verifier, { resource: vaultResource });
    expect(granted.status, JSON.stringify(granted.body)).toBe(200);
    keep("OAuth access token", granted.body.access_token);
    keep("OAuth refresh token", granted.body.refresh_token);
    const renewed = await refreshGrant(iam, clientId, granted.body.refresh_token, { resource: vaultResource });
    expect(renewed.status, JSON.stringify(renewed.body)).toBe(200);
    const accessToken = keep("refreshed OAuth access token", renewed.body.access_token);
    keep("refreshed OAuth refresh token", renewed.body.refresh_token);
    const mcp = { "content-type": "application/json", accept: "application/json, text/event-stream" };
    const initialize = { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "log-check", version: "1" } } };
    expect((await ask("vault", "/mcp", { method: "POST", headers: { ...mcp, ...bearer(accessToken) }, body: JSON.stringify(initialize) })).status).toBe(200);

    // two-factor: enrolled (its secret and backup codes), then a sign-in finished with a backup code
    const guarded = await signUp(iam, uniqueEmail("tfa"));
    const enabled = await call(iam, "POST", "/api/auth/two-factor/enable", { token: guarded.token, body: { password: PASSWORD } });
    expect(enabled.status, JSON.stringify(enabled.body)).toBe(200);
    keep("TOTP address", enabled.body.totpURI);
    keep("TOTP secret", new URL(enabled.body.totpURI).searchParams.get("secret"));
    const backupCodes = enabled.body.backupCodes as string[];
    for (const backup of backupCodes) keep("backup code", backup);
    const confirmed = await call(iam, "POST", "/api/auth/two-factor/verify-totp", { token: guarded.token, body: { code: totp(secretOfUri(enabled.body.totpURI)) } });
    expect(confirmed.status, JSON.stringify(confirmed.body)).toBe(200);
    keep("session after enrolment", confirmed.body.token);
    const firstStep = await call(iam, "POST", "/api/auth/sign-in/email", { body: { email: guarded.email, password: PASSWORD } });
    expect(firstStep.body).toMatchObject({ twoFactorRedirect: true });
    const challenge = cookiesOf(firstStep.headers);
    keep("two-factor challenge cookie", challenge.split("=").slice(1).join("="));
    const secondStep = await call(iam, "POST", "/api/auth/two-factor/verify-backup-code", { cookie: challenge, body: { code: backupCodes[0] } });
    expect(secondStep.status, JSON.stringify(secondStep.body)).toBe(200);
    keep("session after a backup code", secondStep.body.token);

    // the pages' CSRF tokens
    const signInPage = await new PageBrowser(iam).get("/sign-in");
    keep("CSRF token", Object.entries(hiddenFields(signInPage.html, "/sign-in")).find(([name]) => /csrf/i.test(name))?.[1]);

    // webhook signing secrets: billing's (an operator's endpoint) and IAM's audit stream, each rotated
    const billingHook = await json(await at("billing", "/operator/webhook-endpoints", jsonBody({ url: `${receiver.url}/billing` }, bearer(op.token))));
    expect(billingHook.status, JSON.stringify(billingHook.body)).toBe(201);
    keep("billing webhook secret", billingHook.body.secret);
    const billingRotated = await json(await at("billing", `/operator/webhook-endpoints/${billingHook.body.id}/rotate-secret`, jsonBody({}, bearer(op.token))));
    keep("billing webhook secret, rotated", billingRotated.body.secret);
    const auditHook = await json(await at("iam", "/api/audit/endpoints", jsonBody({ url: `${receiver.url}/audit`, orgId }, bearer(owner.token))));
    expect(auditHook.status, JSON.stringify(auditHook.body)).toBe(201);
    keep("audit webhook secret", auditHook.body.secret);
    const auditRotated = await json(await at("iam", `/api/audit/endpoints/${auditHook.body.id}/rotate-secret`, jsonBody({}, bearer(owner.token))));
    keep("audit webhook secret, rotated", auditRotated.body.secret);

    // billing: a paid upgrade, a card's setup secret, portal sessions (by the API and by the mailed way in)
    const paid = await json(
      await at("billing", "/api/billing/upgrade", jsonBody({ planId: "plan_starter", paymentMethodId: "pm_card_visa", billingEmail: owner.email, idempotencyKey: crypto.randomUUID() }, bearer(owner.token))),
    );
    expect(paid.status, JSON.stringify(paid.body)).toBeLessThan(300);
    const invoiceId = paid.body.invoice.id as string;
    ids.set("invoice", invoiceId);
    const setupIntent = await json(await at("billing", `/api/billing/setup-intent?platformId=${platformId}`, { method: "POST", headers: bearer(owner.token) }));
    expect(setupIntent.status, JSON.stringify(setupIntent.body)).toBe(201);
    keep("card setup secret", setupIntent.body.clientSecret);
    const portal = await json(await at("billing", `/api/billing/portal?platformId=${platformId}`, jsonBody({ returnUrl: `${urls.iam}/account` }, bearer(owner.token))));
    expect(portal.status, JSON.stringify(portal.body)).toBe(201);
    const portalId = keep("portal session", portal.body.id);
    keep("portal link", portal.body.url);
    // the way in from a mail or IAM's account page: with the session cookie, a new portal session and 303 to it
    const opened = await at("billing", `/portal/open?platformId=${platformId}`, { headers: { cookie: owner.cookie } });
    await opened.body?.cancel();
    expect(opened.status).toBe(303);
    keep("portal session opened from a mail", /bps_[A-Za-z0-9_-]+/.exec(opened.headers.get("location") ?? "")?.[0]);
    const portalPages = [`/portal/${portalId}`, `/portal/${portalId}/change?tier=growth`, `/portal/${portalId}/details`, `/portal/${portalId}/invoices/${invoiceId}`, `/portal/${portalId}/invoices/${invoiceId}/pdf`];
    for (const page of portalPages) expect((await ask("billing", page)).status, page).toBe(200);
    const portalForm: RequestInit = { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded", origin: urls.billing }, body: "" };
    expect((await ask("billing", `/portal/${portalId}/cancel`, portalForm)).status).toBe(303);
    expect((await ask("billing", `/portal/${portalId}/resume`, portalForm)).status).toBe(303);

    // every secret-bearing address again, with its secret in the path and in a query string, and
    // credentials where a client might paste them by mistake: each request line is written
    const inQuery = (name: string, value: string) => `${name}=${encodeURIComponent(value)}`;
    await ask("billing", `/portal/${portalId}?${inQuery("session", portalId)}`);
    await ask("billing", `/portal/${portalId}/no-such-page?${inQuery("token", portalId)}`);
    await ask("billing", `/portal/open?platformId=${platformId}&${inQuery("portal", portalId)}`, { headers: bearer(owner.token) });
    await ask("billing", `/no-such-route/${portalId}`);
    await ask("billing", `/api/billing/invoices/${invoiceId}?${inQuery("access_token", owner.token)}`, { headers: bearer(owner.token) });
    await ask("iam", `/api/auth/reset-password/${resetToken}?${inQuery("token", resetToken)}`);
    await ask("iam", `/reset-password?${inQuery("token", resetToken)}`);
    await ask("iam", `/api/auth/magic-link/verify?${inQuery("token", magicToken)}&callbackURL=%2F`);
    await ask("iam", `/invitations/${invitationId}?${inQuery("id", invitationId)}`, { headers: { cookie: invitee.cookie } });
    await ask("iam", `/invitations/${invitationId}/accept`, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded", origin: urls.iam, cookie: invitee.cookie }, body: "" });
    await ask("iam", `/device?${inQuery("user_code", userCode)}`, { headers: { cookie: owner.cookie } });
    await ask("iam", `/api/auth/callback/some-provider?${inQuery("code", code)}&${inQuery("state", state)}`);
    await ask("iam", `/api/auth/verify-email?${inQuery("token", verification.searchParams.get("token")!)}`);
    await ask("iam", `/api/core/session?${inQuery("api_key", key)}`, { headers: bearer(owner.token) });
    await ask("platform-registry", `/platforms/${key}`, { headers: { "x-api-key": key } });
    await ask("platform-registry", `/platforms/${platformId}?${inQuery("token", registryToken)}`, { headers: bearer(registryToken) });
    // (a session token, the CLI's access token among them, is 32 letters and digits, the shape of the
    // library's ids: no rule can tell one in a path from an organization's id, and none belongs there)
    await ask("stack-registry", `/api/v1/stacks/${registryToken}?${inQuery("access_token", cliToken)}`, { headers: bearer(cliToken) });
    await ask("stack-registry", `/api/v1/stacks/${device.device_code}?${inQuery("refresh_token", refreshed.body.refresh_token)}`, { headers: bearer(cliToken) });
    await ask("vault", `/mcp?${inQuery("access_token", accessToken)}`, { method: "POST", headers: { ...mcp, ...bearer(accessToken) }, body: JSON.stringify(initialize) });
    await ask("billing", `/operator/webhook-endpoints/${billingHook.body.secret}`, { headers: bearer(op.token) });
  });

  it("wrote none of them: not in any line of any service at any level, nor in any exported span", async () => {
    expect(secrets.size).toBeGreaterThan(40);
    // SIGTERM: what the services still buffer, spans included, goes out first
    await launched.stop();
    const lines = launched.output().split("\n").filter((line) => line.trim() !== "");
    const requestLines = lines.filter((line) => line.includes('"msg":"request"'));
    expect(requestLines.length).toBeGreaterThan(80);
    expect(lines.some((line) => line.includes('"level":20'))).toBe(true); // debug lines were written
    const spans = collector.spans();
    expect(spans.length).toBeGreaterThan(100);

    const where = (line: string) => {
      try {
        const record = JSON.parse(line) as { service?: string; msg?: string };
        return `${record.service ?? "?"} "${record.msg ?? ""}"`;
      } catch {
        return `a plain line: ${line.slice(0, 30)}…`;
      }
    };
    const leaks: string[] = [];
    for (const [what, secret] of secrets) {
      const forms = [...new Set([secret, encodeURIComponent(secret), JSON.stringify(secret).slice(1, -1)])];
      const found = (text: string) => forms.some((form) => text.includes(form));
      for (const line of lines.filter(found)) leaks.push(`${what} is in the log: ${where(line)}`);
      for (const span of spans.filter((s) => found(JSON.stringify(s)))) leaks.push(`${what} is in the span "${span.name}" of ${span.service}`);
    }
    expect([...new Set(leaks)]).toEqual([]);

    // what is not a secret stays readable: the route table decides, and ids keep their value
    const paths = new Set(requestLines.map((line) => (JSON.parse(line) as { path: string }).path));
    const [orgId, platformId] = [ids.get("organization")!, ids.get("platform")!];
    for (const path of [
      "/portal/[redacted]",
      "/portal/[redacted]/invoices/[redacted]/pdf".replace("invoices/[redacted]", `invoices/${ids.get("invoice")}`),
      "/portal/open",
      "/api/auth/reset-password/[redacted]",
      "/invitations/[redacted]",
      "/invitations/[redacted]/accept",
      `/api/core/organizations/${orgId}/invitations/[redacted]`,
      `/platforms/${platformId}`,
      "/platforms/[redacted]",
      "/api/v1/stacks/[redacted]",
    ]) {
      expect(paths, path).toContain(path);
    }
    const pathOf = (span: (typeof spans)[number]) => span.attributes.find((a) => a.key === "url.path")?.value.stringValue;
    expect(spans.filter((span) => span.service === "billing" && span.name === "GET /portal/:id").map(pathOf)).toContain("/portal/[redacted]");
    expect(spans.filter((span) => span.service === "billing" && span.name === "GET /portal/open").map(pathOf)).toContain("/portal/open");
  });
});
