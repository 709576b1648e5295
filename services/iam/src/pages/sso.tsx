import { eq } from "drizzle-orm";
import type { Context } from "hono";
import { ApiError, clientIpOf, rawRequestOf, type ServiceApp } from "@core/kit";
import type { IamContext } from "../app.js";
import { callAuthLibrary } from "../auth-library.js";
import { ssoProvider } from "../db/schema.js";
import { membershipsOf } from "../organizations.js";
import { rolesOf } from "../permissions.js";
import {
  deleteProvider,
  providerAddresses,
  providerRefusedNow,
  providersOf,
  providerToStart,
  providerView,
  registerProvider,
  SSO_JOIN_ROLES,
  SSO_REFUSALS,
  updateProvider,
  type SsoActor,
  type SsoJoinRole,
  type SsoProviderRow,
  type SsoProviderView,
} from "../sso.js";
import { actorOf } from "../access.js";
import { csrfToken, ensureBrowserBinding } from "./csrf.js";
import { Alert, CsrfField, Field, Layout, type Viewer } from "./layout.js";
import { browserForm, libraryCallback, page, pageSession, render, safeNext, sessionForm, signInAddress } from "./page.js";

type Notice = { kind: "error" | "success" | "info"; text: string } | null;

/** What the SSO callback's `?error=` codes mean to the person who came back with one. */
export function ssoErrorText(code: string): { text: string; status: 400 | 502 } {
  if (code === SSO_REFUSALS.outsideDomains) return { text: "Your identity provider signed you in with an address outside the domains of the organization it serves. Sign in there with your work address.", status: 400 };
  if (code === SSO_REFUSALS.unverifiedEmail) return { text: "Your identity provider did not confirm that your address is verified, so we cannot sign you in with it. Ask your administrator.", status: 400 };
  if (/state|restart/i.test(code)) return { text: "This sign-in was not started here, or took too long. Start it again below.", status: 400 };
  if (code === "access_denied") return { text: "The sign-in was cancelled at your identity provider.", status: 400 };
  if (code === SSO_REFUSALS.providerNotAllowed) return { text: PROVIDER_NOT_ALLOWED, status: 502 };
  if (code === "invalid_provider" || code === "discovery_failed") return { text: "Your organization's identity provider could not be reached, or its answer could not be verified. Try again in a moment; if it keeps failing, tell your administrator.", status: 502 };
  return { text: "Single sign-on did not complete. Start it again below.", status: 400 };
}

function SsoSignInPage(props: { csrf: string; next: string | null; email?: string; notice?: Notice }) {
  return (
    <Layout title="Sign in with single sign-on">
      <p class="lead">If your organization signs you in through its own identity provider, enter your work address: we send you there.</p>
      {props.notice ? (
        <Alert kind={props.notice.kind} id="sso-notice">
          {props.notice.text}
        </Alert>
      ) : null}
      <div class="card">
        <form method="post" action="/sign-in/sso">
          <CsrfField token={props.csrf} />
          {props.next ? <input type="hidden" name="next" value={props.next} /> : null}
          <Field name="email" label="Work email" type="email" autocomplete="email" value={props.email} autofocus maxlength={320} describedBy={props.notice?.kind === "error" ? "sso-notice" : null} />
          <button type="submit">Continue</button>
        </form>
      </div>
      <p>
        <a href={props.next ? signInAddress(props.next) : "/sign-in"}>Sign in with a password or an emailed link instead</a>
      </p>
    </Layout>
  );
}

/**
 * The SSO page's form posts to us, and we answer with a redirect to the provider: browsers apply
 * the page's `form-action` to that redirect too, so this page (only) allows the origins of the
 * providers' authorization endpoints besides its own.
 */
async function withProviderFormAction(ctx: IamContext, response: Response): Promise<Response> {
  const rows = await ctx.db.select({ oidcConfig: ssoProvider.oidcConfig }).from(ssoProvider).where(eq(ssoProvider.domainVerified, true));
  const origins = new Set<string>();
  for (const row of rows) {
    try {
      const endpoint = (JSON.parse(row.oidcConfig ?? "{}") as { authorizationEndpoint?: unknown }).authorizationEndpoint;
      if (typeof endpoint === "string" && /^https?:/.test(endpoint)) origins.add(new URL(endpoint).origin);
    } catch {
      // a provider without a readable configuration cannot be started either
    }
  }
  const policy = response.headers.get("content-security-policy");
  if (policy && origins.size > 0) response.headers.set("content-security-policy", policy.replace("form-action 'self'", `form-action 'self' ${[...origins].join(" ")}`));
  return response;
}

const showSso = async (c: Context, ctx: IamContext, markup: Parameters<typeof render>[1], status?: Parameters<typeof render>[2]) => withProviderFormAction(ctx, await render(c, markup, status));

const browserCsrf = (c: Context, ctx: IamContext) => csrfToken(ctx.session.secret, ensureBrowserBinding(c, ctx.config.secureCookies));

/**
 * The plugin's sign-in start (its `POST /sign-in/sso`, through the library's handler so its rate
 * limit counts each start per client address) for the provider IAM chose, named by its id so the
 * plugin starts that one, in the provider's scope (sso-connections.ts): the plugin trusts the
 * provider's origins for this call only, and connects to them only through the SSRF guard.
 */
const callStart = (c: Context, ctx: IamContext, provider: SsoProviderRow, body: Record<string, unknown>, headers: Headers) =>
  ctx.ssoConnections.inProviderScope(providerAddresses(provider), () =>
    callAuthLibrary(c, ctx, new Request(new URL("/api/auth/sign-in/sso", ctx.config.iamUrl), { method: "POST", headers, body: JSON.stringify({ ...body, providerId: provider.providerId }) })),
  );

/**
 * Starts the provider's OIDC flow and sends the browser there with the plugin's state cookie. The
 * call carries no cookie nor origin of the browser: it is our server asking, so the library's
 * browser checks do not refuse a start reached by a plain link; its addresses to come back to are
 * IAM's own paths.
 */
async function startSso(c: Context, ctx: IamContext, provider: SsoProviderRow, email: string | null, next: string | null): Promise<Response | { refused: string; status: 400 | 404 | 429 | 502 }> {
  if (providerRefusedNow(ctx, provider)) return { refused: PROVIDER_NOT_ALLOWED, status: 502 };
  const headers = new Headers({ "content-type": "application/json", "user-agent": c.req.header("user-agent") ?? "" });
  const answer = await callStart(c, ctx, provider, {
    ...(email ? { email, loginHint: email } : {}),
    callbackURL: next ? libraryCallback(next) : "/",
    newUserCallbackURL: next ? libraryCallback(next) : "/account",
    errorCallbackURL: next ? `/sign-in/sso?next=${encodeURIComponent(next)}` : "/sign-in/sso",
  }, headers);
  if (answer.status === 429) {
    const retryAfter = answer.headers.get("retry-after") ?? "60";
    c.header("retry-after", retryAfter);
    return { refused: `Too many sign-in attempts. Wait ${retryAfter} seconds, then try again.`, status: 429 };
  }
  if (answer.status === 404) return { refused: "", status: 404 };
  if (answer.status === 401) return { refused: "Single sign-on for this organization is waiting for an operator's approval of its domains. Sign in another way for now.", status: 400 };
  if (!answer.ok) {
    if (answer.status >= 500) throw new Error(`the auth library answered ${answer.status} to an SSO start`);
    return { refused: "Single sign-on could not start. Try again in a moment.", status: 400 };
  }
  const { url } = (await answer.json()) as { url: string };
  for (const cookie of answer.headers.getSetCookie()) c.header("set-cookie", cookie, { append: true });
  c.header("cache-control", "no-store");
  return c.redirect(url, 302);
}

/** The plugin's addresses to come back to in a start's body, with the library's code for each refused one. */
const START_RETURNS = { callbackURL: "INVALID_CALLBACK_URL", errorCallbackURL: "INVALID_ERROR_CALLBACK_URL", newUserCallbackURL: "INVALID_NEW_USER_CALLBACK_URL" } as const;

/**
 * A start sent to the library's route by a client: the library judges its Origin (a browser's
 * write) and where it comes back to against its trusted origins, which during the provider's scope
 * include the provider's. So what only the scope would let through (the provider's origin, where it
 * is not one IAM trusts anyway) is refused here first, as the library refuses an untrusted one: the
 * scope changes nothing about who may start a sign-in nor where a browser may return.
 */
function refuseProviderOnlyOrigins(c: Context, ctx: IamContext, provider: SsoProviderRow, body: Record<string, unknown>) {
  const providerOnly = new Set(providerAddresses(provider).map(originOfAddress));
  for (const trusted of [...ctx.config.trustedOrigins, new URL(ctx.config.iamUrl).origin]) providerOnly.delete(trusted);
  // the library reads the Referer where a browser sent no Origin
  if (providerOnly.has(originOfAddress(c.req.header("origin") || c.req.header("referer") || ""))) throw new ApiError(403, "INVALID_ORIGIN", "Invalid origin");
  for (const [field, code] of Object.entries(START_RETURNS)) {
    const value = body[field];
    if (typeof value === "string" && providerOnly.has(originOfAddress(value))) throw new ApiError(403, code, `Invalid ${field}: the identity provider is no place to come back to`);
  }
}

const originOfAddress = (address: string) => {
  try {
    return new URL(address).origin;
  } catch {
    return "";
  }
};

const bodyText = (body: Record<string, unknown>, field: string) => (typeof body[field] === "string" ? (body[field] as string).slice(0, 320) : undefined);

const PROVIDER_NOT_ALLOWED = "Your organization's identity provider is at an address this service does not connect to. Tell your administrator.";

const NO_PROVIDER_FOR_ORG = "This organization has no single sign-on. Sign in another way.";
const NO_PROVIDER_FOR_EMAIL = "No organization signs in addresses like this one through single sign-on. Sign in with a password or an emailed link.";

function OwnerSsoPage(props: { viewer: Viewer; orgs: { orgId: string; name: string; slug: string; provider: SsoProviderView | null }[]; notice?: Notice; error?: { orgId: string; text: string } | null }) {
  return (
    <Layout title="Single sign-on" viewer={props.viewer}>
      <p class="lead">Let the people of your organization sign in through its own OpenID Connect provider. Only owners see this page.</p>
      {props.notice ? <Alert kind={props.notice.kind}>{props.notice.text}</Alert> : null}
      {props.orgs.length === 0 ? <p>You own no organization.</p> : null}
      {props.orgs.map((org) => {
        const p = org.provider;
        const errorId = `sso-error-${org.slug}`;
        const error = props.error?.orgId === org.orgId ? props.error.text : null;
        return (
          <section class="card" aria-labelledby={`sso-${org.slug}`}>
            <h2 id={`sso-${org.slug}`}>
              {org.name} <code>{org.slug}</code>
            </h2>
            {error ? (
              <Alert kind="error" id={errorId}>
                {error}
              </Alert>
            ) : null}
            {p ? (
              <>
                <dl>
                  <dt>Issuer</dt>
                  <dd>
                    <code>{p.issuer}</code>
                  </dd>
                  <dt>Client id</dt>
                  <dd>
                    <code>{p.clientId}</code>
                  </dd>
                  <dt>Domains</dt>
                  <dd>{p.domains.join(", ")}</dd>
                  <dt>Status</dt>
                  <dd>{p.domainsApproved ? "Approved: people with these addresses sign in through your provider." : "Waiting for an operator to approve the domains: nobody signs in through it yet."}</dd>
                  <dt>New members join as</dt>
                  <dd>{p.defaultRole}</dd>
                  <dt>Redirect URI to register at your provider</dt>
                  <dd>
                    <code>{p.redirectUri}</code>
                  </dd>
                </dl>
                <h3>Change it</h3>
                <form method="post" action="/account/sso/update">
                  <CsrfField token={props.viewer.csrf} />
                  <input type="hidden" name="orgId" value={org.orgId} />
                  <input type="hidden" name="providerId" value={p.providerId} />
                  <Field name="clientId" id={`update-client-id-${org.slug}`} label="Client id" value={p.clientId} maxlength={255} />
                  <Field name="clientSecret" id={`update-client-secret-${org.slug}`} label="New client secret" type="password" autocomplete="off" required={false} maxlength={1024} hint="Leave empty to keep the current one." />
                  <Field name="domains" id={`update-domains-${org.slug}`} label="Email domains" value={p.domains.join(", ")} maxlength={2000} hint="Comma-separated. Changed domains need an operator's approval again." describedBy={error ? errorId : null} />
                  <RoleSelect id={`update-role-${org.slug}`} value={p.defaultRole} />
                  <button type="submit">Save changes</button>
                </form>
                <form method="post" action="/account/sso/delete">
                  <CsrfField token={props.viewer.csrf} />
                  <input type="hidden" name="orgId" value={org.orgId} />
                  <input type="hidden" name="providerId" value={p.providerId} />
                  <button type="submit" class="danger" aria-label={`Remove single sign-on of ${org.name}`}>
                    Remove single sign-on
                  </button>
                </form>
              </>
            ) : (
              <form method="post" action="/account/sso">
                <CsrfField token={props.viewer.csrf} />
                <input type="hidden" name="orgId" value={org.orgId} />
                <Field name="issuer" id={`issuer-${org.slug}`} label="Issuer URL" maxlength={1024} hint="The provider's issuer, an https address, as its /.well-known/openid-configuration names it." describedBy={error ? errorId : null} />
                <Field name="clientId" id={`client-id-${org.slug}`} label="Client id" maxlength={255} />
                <Field name="clientSecret" id={`client-secret-${org.slug}`} label="Client secret" type="password" autocomplete="off" maxlength={1024} />
                <Field name="domains" id={`domains-${org.slug}`} label="Email domains" maxlength={2000} hint="Comma-separated, like example.com, example.org. An operator approves them before anyone signs in." />
                <RoleSelect id={`role-${org.slug}`} value="member" />
                <button type="submit">Register provider</button>
              </form>
            )}
          </section>
        );
      })}
      <p>
        <a href="/account">Back to your account</a>
      </p>
    </Layout>
  );
}

function RoleSelect(props: { id: string; value: SsoJoinRole }) {
  return (
    <div class="field">
      <label for={props.id}>Role of people joining on their first sign-in</label>
      <select id={props.id} name="defaultRole">
        {SSO_JOIN_ROLES.map((role) => (
          <option value={role} selected={role === props.value}>
            {role}
          </option>
        ))}
      </select>
    </div>
  );
}

const splitDomains = (value: string | undefined) =>
  (value ?? "")
    .split(/[\s,]+/)
    .map((d) => d.trim())
    .filter(Boolean)
    .slice(0, 20);
const roleOf = (value: string | undefined): SsoJoinRole => (value === "admin" ? "admin" : "member");

/** Single sign-on pages: the sign-in start (by organization or by address) and the owners' settings. */
export function ssoPages(app: ServiceApp, ctx: IamContext) {
  app.get(
    "/sign-in/sso",
    page(ctx, async (c) => {
      const next = safeNext(c.req.query("next"), ctx.config.returnOrigins);
      const organizationSlug = c.req.query("organization");
      if (organizationSlug) {
        // an organization without a provider (or none of that slug): the plugin's answer would be a bare 400
        const provider = await providerToStart(ctx.db, { organizationSlug: organizationSlug.slice(0, 63) });
        if (!provider) return showSso(c, ctx, <SsoSignInPage csrf={browserCsrf(c, ctx)} next={next} notice={{ kind: "error", text: NO_PROVIDER_FOR_ORG }} />, 404);
        const started = await startSso(c, ctx, provider, null, next);
        if (started instanceof Response) return started;
        const text = started.status === 404 ? NO_PROVIDER_FOR_ORG : started.refused;
        return showSso(c, ctx, <SsoSignInPage csrf={browserCsrf(c, ctx)} next={next} notice={{ kind: "error", text }} />, started.status);
      }
      const error = c.req.query("error");
      if (error) {
        const { text, status } = ssoErrorText(error.slice(0, 64));
        return showSso(c, ctx, <SsoSignInPage csrf={browserCsrf(c, ctx)} next={next} notice={{ kind: "error", text }} />, status);
      }
      return showSso(c, ctx, <SsoSignInPage csrf={browserCsrf(c, ctx)} next={next} />);
    }),
  );

  // The plugin's OIDC callback, as the library serves it, except where it gives up before it knows
  // where the sign-in began (a state it did not issue to this browser): the library sends that to
  // its own bare error page, and the person is better served by the SSO page's sentence and a way
  // to start again. (The library's global `onAPIError.errorURL` would do it for every route.)
  //
  // The callback runs in the provider's scope: the code exchange, the key set and the userinfo
  // request are connections to the provider, through the SSRF guard. A provider the rule refuses now
  // (sso-connections.ts) is not called at all.
  app.get("/api/auth/sso/callback/:providerId", async (c) => {
    const provider = await providerToStart(ctx.db, { providerId: c.req.param("providerId").slice(0, 200) });
    if (provider && providerRefusedNow(ctx, provider)) {
      await ctx.audit.record({ action: "auth.sso.sign_in", outcome: "failure", actorType: "anonymous", orgId: provider.organizationId, ip: clientIpOf(c), userAgent: c.req.header("user-agent") ?? null, requestId: c.get("requestId"), metadata: { code: SSO_REFUSALS.providerNotAllowed, providerId: provider.providerId } });
      return c.redirect(`/sign-in/sso?error=${SSO_REFUSALS.providerNotAllowed}`, 302);
    }
    const callback = async () => callAuthLibrary(c, ctx, await rawRequestOf(c));
    const answer = provider ? await ctx.ssoConnections.inProviderScope(providerAddresses(provider), callback) : await callback();
    const location = answer.headers.get("location");
    if (answer.status !== 302 || !location) return answer;
    const target = new URL(location, ctx.config.iamUrl);
    if (target.origin !== new URL(ctx.config.iamUrl).origin || target.pathname !== "/api/auth/error") return answer;
    const error = target.searchParams.get("error") ?? "invalid_state";
    const moved = new Response(null, answer);
    moved.headers.set("location", `/sign-in/sso?error=${encodeURIComponent(error.slice(0, 64))}`);
    return moved;
  });

  // The library's own start route, for clients that start single sign-on themselves: the provider the
  // body names is judged and started as the page does; where none is found the plugin answers itself.
  app.post("/api/auth/sign-in/sso", async (c) => {
    let body: Record<string, unknown> | null = null;
    try {
      const parsed: unknown = /json/i.test(c.req.header("content-type") ?? "") ? JSON.parse(await c.req.text()) : null;
      if (typeof parsed === "object" && parsed !== null && !Array.isArray(parsed)) body = parsed as Record<string, unknown>;
    } catch {
      // not JSON: the library answers that
    }
    const by = body && { providerId: bodyText(body, "providerId"), organizationSlug: bodyText(body, "organizationSlug"), email: bodyText(body, "email"), domain: bodyText(body, "domain") };
    const provider = by ? await providerToStart(ctx.db, by) : null;
    if (!body || !provider) return callAuthLibrary(c, ctx, await rawRequestOf(c));
    if (providerRefusedNow(ctx, provider)) throw new ApiError(502, "UPSTREAM_UNAVAILABLE", "The organization's identity provider is at an address this service does not connect to");
    refuseProviderOnlyOrigins(c, ctx, provider, body);
    const headers = new Headers(c.req.raw.headers);
    headers.delete("content-length");
    return callStart(c, ctx, provider, body, headers);
  });

  app.post(
    "/sign-in/sso",
    page(ctx, async (c) => {
      const form = await browserForm(c, ctx);
      const next = safeNext(form.next, ctx.config.returnOrigins);
      const email = (form.email ?? "").trim().slice(0, 320);
      if (!/^[^@\s]+@[^@\s]+$/.test(email)) return showSso(c, ctx, <SsoSignInPage csrf={browserCsrf(c, ctx)} next={next} email={email} notice={{ kind: "error", text: "Enter your work email address." }} />, 400);
      const provider = await providerToStart(ctx.db, { email });
      if (!provider) return showSso(c, ctx, <SsoSignInPage csrf={browserCsrf(c, ctx)} next={next} email={email} notice={{ kind: "error", text: NO_PROVIDER_FOR_EMAIL }} />, 404);
      const started = await startSso(c, ctx, provider, email, next);
      if (started instanceof Response) return started;
      const text = started.status === 404 ? NO_PROVIDER_FOR_EMAIL : started.refused;
      return showSso(c, ctx, <SsoSignInPage csrf={browserCsrf(c, ctx)} next={next} email={email} notice={{ kind: "error", text }} />, started.status);
    }),
  );

  /** The organizations the viewer owns, but those whose policy holds this session back (policy-gate.ts). */
  async function ownedOrgs(userId: string, sessionToken: string) {
    const owned = [];
    for (const m of await membershipsOf(ctx.db, userId)) {
      if (!rolesOf(m.role ?? "").includes("owner")) continue;
      if (!(await ctx.principals.standingIn(sessionToken, m.orgId))?.restriction) owned.push(m);
    }
    return Promise.all(
      owned.map(async (m) => {
        const [row] = await providersOf(ctx.db, m.orgId);
        return { orgId: m.orgId, name: m.name, slug: m.slug, provider: row ? providerView(row, ctx.config.iamUrl) : null };
      }),
    );
  }

  const NOTICES: Record<string, string> = {
    created: "Provider registered. An operator approves its domains before anyone signs in through it.",
    saved: "Changes saved.",
    removed: "Single sign-on removed.",
  };

  app.get(
    "/account/sso",
    page(ctx, async (c) => {
      const session = await pageSession(c, ctx);
      if (!session) return c.redirect(signInAddress("/account/sso"), 302);
      const done = c.req.query("done");
      const notice: Notice = done && NOTICES[done] ? { kind: "success", text: NOTICES[done]! } : null;
      return render(c, <OwnerSsoPage viewer={session.viewer} orgs={await ownedOrgs(session.principal.userId, session.token)} notice={notice} />);
    }),
  );

  /** A settings form's action as the owner; a refusal is shown on the page, next to its organization. */
  const ownerAction = (path: string, act: (actor: SsoActor, form: Record<string, string>) => Promise<string>) =>
    app.post(
      path,
      page(ctx, async (c) => {
        const { caller, form, viewer } = await sessionForm(c, ctx);
        const actor: SsoActor = { userId: caller.principal.userId, sessionToken: caller.token, audit: actorOf(c, { kind: "principal", principal: caller.principal }) };
        try {
          const done = await act(actor, form);
          return c.redirect(`/account/sso?done=${done}`, 303);
        } catch (err) {
          if (!(err instanceof ApiError) || err.status >= 500 && err.status !== 502) throw err;
          const orgs = await ownedOrgs(caller.principal.userId, caller.token);
          return render(c, <OwnerSsoPage viewer={viewer} orgs={orgs} error={{ orgId: form.orgId ?? "", text: err.message }} />, err.status as 400);
        }
      }),
    );

  ownerAction("/account/sso", async (actor, form) => {
    if (["issuer", "clientId", "clientSecret"].some((name) => !(form[name] ?? "").trim())) throw new ApiError(400, "VALIDATION_ERROR", "Fill in the issuer URL, the client id and the client secret.");
    await registerProvider(ctx, form.orgId ?? "", actor, {
      issuer: (form.issuer ?? "").trim(),
      clientId: (form.clientId ?? "").trim(),
      clientSecret: form.clientSecret ?? "",
      domains: splitDomains(form.domains),
      defaultRole: roleOf(form.defaultRole),
    });
    return "created";
  });

  ownerAction("/account/sso/update", async (actor, form) => {
    await updateProvider(ctx, form.orgId ?? "", form.providerId ?? "", actor, {
      ...(form.clientId?.trim() ? { clientId: form.clientId.trim() } : {}),
      ...(form.clientSecret ? { clientSecret: form.clientSecret } : {}),
      domains: splitDomains(form.domains),
      defaultRole: roleOf(form.defaultRole),
    });
    return "saved";
  });

  ownerAction("/account/sso/delete", async (actor, form) => {
    await deleteProvider(ctx, form.orgId ?? "", form.providerId ?? "", actor);
    return "removed";
  });
}
