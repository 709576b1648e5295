import { and, eq, isNotNull } from "drizzle-orm";
import type { Context } from "hono";
import { deleteCookie, getCookie, setCookie } from "hono/cookie";
import { createCipheriv, createDecipheriv, createHash, randomBytes } from "node:crypto";
import { ApiError, unauthenticated, type ServiceApp } from "@core/kit";
import type { Principal } from "@core/service-auth";
import { sessionCookieName } from "../session-token.js";
import type { IamContext } from "../app.js";
import { callAuthLibraryAs } from "../auth-library.js";
import { account, user } from "../db/schema.js";
import { pendingInvitationsFor, type InvitationView } from "../invitation-view.js";
import { membershipsOf, type Membership } from "../organizations.js";
import { REVOKED_NOTICE_COOKIE } from "../unproven-access.js";
import { rolesOf } from "../permissions.js";
import { ProfileInput, updateProfile } from "../routes/profile.js";
import { activeSessions, revokeOtherSessions, revokeSession } from "../routes/sessions.js";
import { Alert, CsrfField, Field, Layout, type Viewer } from "./layout.js";
import { cookieSessionToken, libraryRefusal, page, pageSession, redirectWithCookies, render, sessionForm, signInAddress } from "./page.js";
import { PASSKEY_NOTICES, passkeyAccountRoutes, passkeysOf, PasskeysSection, type PasskeyItem } from "./passkeys.js";
import { TwoFactorSummary } from "./two-factor.js";

/** What the api-key plugin lists (the key itself is never among it). */
interface ApiKeyItem {
  id: string;
  name: string | null;
  start: string | null;
  createdAt: string;
  expiresAt: string | null;
}

interface AccountView {
  viewer: Viewer;
  principal: Principal;
  name: string;
  /** the address is proven (the verification link was opened, or a magic link was used) */
  emailVerified: boolean;
  /** the account has a password (a magic-link-only account has none) */
  hasPassword: boolean;
  twoFactorEnabled: boolean;
  /** every organization the viewer is in, the one this session acts in marked */
  memberships: (Membership & { active: boolean })[];
  /** invitations waiting for the viewer's address */
  invitations: InvitationView[];
  sessions: Awaited<ReturnType<typeof activeSessions>>;
  apiKeys: ApiKeyItem[] | null;
  passkeys: PasskeyItem[] | null;
}

interface AccountMessages {
  notice?: string | null;
  nameError?: string | null;
  verifyError?: string | null;
  passwordError?: string | null;
  sessionsError?: string | null;
  orgError?: string | null;
  keysError?: string | null;
  passkeysError?: string | null;
  /** a key just created: shown this once */
  createdKey?: { name: string; key: string } | null;
  keyName?: string;
}

const NOTICES: Record<string, string> = {
  "saved:profile": "Your name is saved.",
  "created:organization": "Your organization is ready, and this session now acts in it (switch below).",
  "revoked:session": "That session is signed out.",
  "revoked:others": "Your other sessions are signed out, command-line logins included.",
  "revoked:key": "The API key is revoked: it no longer works.",
  "sent:verification": "We sent a confirmation link to your address. It works for 24 hours.",
  "sent:password-link": "We sent you a link to set a password. It works once, for 1 hour.",
  "changed:password": "Your password is changed.",
  "changed:password-others": "Your password is changed, and your other sessions are signed out.",
  ...PASSKEY_NOTICES,
};

const PASSWORD = { min: 8, max: 128 };

/** The cookie that carries a just-created API key to the page that shows it, sealed, for a minute. */
const CREATED_KEY_COOKIE = "core-created-key";
const CREATED_KEY_SECONDS = 60;

/** key lifetimes offered (the plugin allows 1 to 365 days, or none) */
const KEY_LIFETIMES = [
  { value: "30", label: "30 days" },
  { value: "90", label: "90 days" },
  { value: "365", label: "1 year" },
  { value: "never", label: "Never expires" },
];

const day = (iso: string | Date) => new Date(iso).toISOString().slice(0, 10);
/** "2026-11-24 19:21 UTC": sessions come and go within a day */
const minute = (iso: string | Date) => `${new Date(iso).toISOString().slice(0, 16).replace("T", " ")} UTC`;

/** "Chrome on Linux" for browsers; other programs (the CLI) by their own user agent. */
export function describeAgent(agent: string | null): string {
  if (!agent) return "Unknown program";
  const browser = /Edg\//.test(agent) ? "Edge" : /Firefox\//.test(agent) ? "Firefox" : /Chrom(e|ium)\//.test(agent) ? "Chrome" : /Safari\//.test(agent) ? "Safari" : null;
  const os = /Windows/.test(agent) ? "Windows" : /Android/.test(agent) ? "Android" : /iPhone|iPad/.test(agent) ? "iOS" : /Mac OS X/.test(agent) ? "macOS" : /Linux/.test(agent) ? "Linux" : null;
  if (browser) return os ? `${browser} on ${os}` : browser;
  return agent.length > 60 ? `${agent.slice(0, 57)}...` : agent;
}

/** Invitations waiting for the viewer, each a link to the page that answers it. */
export function PendingInvitations(props: { invitations: InvitationView[] }) {
  return (
    <ul class="items">
      {props.invitations.map((i) => (
        <li>
          <div class="item-text">
            <strong>{i.organization.name}</strong> <code>{i.organization.slug}</code>
            <br />
            <span class="muted">
              {i.role} · from {i.inviter.name} · open until {day(i.expiresAt)}
            </span>
          </div>
          <a href={`/invitations/${i.id}`} aria-label={`Answer the invitation to ${i.organization.name}`}>
            Answer
          </a>
        </li>
      ))}
    </ul>
  );
}

function AccountPage(props: { view: AccountView; messages?: AccountMessages }) {
  const { view } = props;
  const m = props.messages ?? {};
  return (
    <Layout title="Your account" viewer={view.viewer}>
      {m.notice ? <Alert kind="success">{m.notice}</Alert> : null}
      {m.createdKey ? (
        <Alert kind="success">
          <p>
            New API key <strong>{m.createdKey.name}</strong>. Copy it now: it is shown only this once, and a reload will not show it again.
          </p>
          <code class="secret" id="new-api-key">
            {m.createdKey.key}
          </code>
        </Alert>
      ) : null}

      <section class="card" aria-labelledby="profile-heading">
        <h2 id="profile-heading">Profile</h2>
        <dl class="facts">
          <dt>Email</dt>
          <dd>
            {view.principal.email} {view.emailVerified ? <span class="badge">confirmed</span> : <span class="badge warn">not confirmed</span>}
          </dd>
        </dl>
        {view.emailVerified ? null : (
          <form method="post" action="/account/verify-email" class="inline">
            <CsrfField token={view.viewer.csrf} />
            {m.verifyError ? (
              <Alert kind="error" id="verify-error">
                {m.verifyError}
              </Alert>
            ) : null}
            <p class="muted">Until you confirm it, signing in with an emailed link removes your password and signs out your other sessions.</p>
            <button type="submit" class="secondary">
              Send the confirmation link again
            </button>
          </form>
        )}
        <form method="post" action="/account/profile">
          <CsrfField token={view.viewer.csrf} />
          <Field name="name" label="Name" value={view.name} autocomplete="name" maxlength={100} error={m.nameError} />
          <button type="submit">Save name</button>
        </form>
      </section>

      <section class="card" aria-labelledby="password-heading" id="password">
        <h2 id="password-heading">Password</h2>
        {m.passwordError ? (
          <Alert kind="error" id="password-error">
            {m.passwordError}
          </Alert>
        ) : null}
        {view.hasPassword ? (
          <form method="post" action="/account/password">
            <CsrfField token={view.viewer.csrf} />
            <Field name="current" label="Current password" type="password" autocomplete="current-password" maxlength={PASSWORD.max} describedBy={m.passwordError ? "password-error" : null} />
            <Field name="password" label="New password" type="password" autocomplete="new-password" minlength={PASSWORD.min} maxlength={PASSWORD.max} hint={`At least ${PASSWORD.min} characters.`} />
            <div class="field">
              <label>
                <input type="checkbox" name="signOutOthers" value="yes" checked /> Sign out my other sessions (command-line logins and connected apps included)
              </label>
            </div>
            <button type="submit">Change password</button>
          </form>
        ) : (
          <form method="post" action="/account/password-link">
            <CsrfField token={view.viewer.csrf} />
            <p>This account has no password: you sign in with links we email you. To use a password too, we mail you a link to set one.</p>
            <button type="submit" class="secondary">
              Email me a link to set a password
            </button>
          </form>
        )}
      </section>

      <TwoFactorSummary enabled={view.twoFactorEnabled} />

      <section class="card" aria-labelledby="org-heading" id="organizations">
        <h2 id="org-heading">Organizations</h2>
        {m.orgError ? (
          <Alert kind="error" id="org-error">
            {m.orgError}
          </Alert>
        ) : null}
        {view.memberships.length === 0 ? (
          <p>You are not in an organization yet.</p>
        ) : (
          <>
            <p class="muted">This browser acts in one organization at a time; the command line chooses its own with <code>core org switch</code>.</p>
            <ul class="items">
              {view.memberships.map((org) => (
                <li>
                  <div class="item-text">
                    <strong>{org.name}</strong> <code>{org.slug}</code> {org.active ? <span class="badge">Active here</span> : null}
                    <br />
                    <span class="muted">
                      {org.role ?? "member"}
                      {org.orgType === "core-operator" ? " · operators" : org.platformId ? ` · platform ${org.platformId}` : ""}
                    </span>
                  </div>
                  {org.active ? null : (
                    <form method="post" action="/account/organization">
                      <CsrfField token={view.viewer.csrf} />
                      <input type="hidden" name="slug" value={org.slug} />
                      <button type="submit" class="secondary small" aria-label={`Switch to ${org.name}`}>
                        Switch
                      </button>
                    </form>
                  )}
                </li>
              ))}
            </ul>
          </>
        )}
        {view.invitations.length > 0 ? (
          <>
            <h3 id="invitations">Invitations waiting for you</h3>
            <PendingInvitations invitations={view.invitations} />
          </>
        ) : null}
        <p>
          <a href="/onboarding">Set up {view.memberships.length > 0 ? "another" : "an"} organization</a>
        </p>
        {view.memberships.some((m) => rolesOf(m.role ?? "").includes("owner")) ? (
          <p>
            <a href="/account/sso">Single sign-on for the organizations you own</a>
          </p>
        ) : null}
      </section>

      <section class="card" aria-labelledby="sessions-heading">
        <h2 id="sessions-heading">Active sessions</h2>
        {m.sessionsError ? <Alert kind="error">{m.sessionsError}</Alert> : null}
        <ul class="items">
          {view.sessions.map((s) => (
            <li>
              <div class="item-text">
                <strong>{describeAgent(s.userAgent)}</strong> {s.current ? <span class="badge">This browser</span> : null}
                <br />
                <span class="muted">
                  {s.ipAddress || "unknown address"} · since {minute(s.createdAt)} · until {minute(s.expiresAt)}
                </span>
              </div>
              <form method="post" action="/account/sessions/revoke">
                <CsrfField token={view.viewer.csrf} />
                <input type="hidden" name="id" value={s.id} />
                <button type="submit" class="secondary small" aria-label={`${s.current ? "Sign out" : "Revoke"}: ${describeAgent(s.userAgent)}, since ${minute(s.createdAt)}`}>
                  {s.current ? "Sign out" : "Revoke"}
                </button>
              </form>
            </li>
          ))}
        </ul>
        {view.sessions.some((s) => !s.current) ? (
          <form method="post" action="/account/sessions/revoke-others">
            <CsrfField token={view.viewer.csrf} />
            <button type="submit" class="secondary">
              Sign out everywhere else
            </button>
          </form>
        ) : null}
      </section>

      <section class="card" aria-labelledby="keys-heading">
        <h2 id="keys-heading">API keys</h2>
        <p class="muted">
          Programs send a key in the <code>x-api-key</code> header and act as you.
        </p>
        {m.keysError ? (
          <Alert kind="error" id="keys-error">
            {m.keysError}
          </Alert>
        ) : null}
        {view.apiKeys === null ? (
          <p>Your keys could not be listed just now.</p>
        ) : view.apiKeys.length === 0 ? (
          <p>You have no API keys.</p>
        ) : (
          <ul class="items">
            {view.apiKeys.map((k) => (
              <li>
                <div class="item-text">
                  <strong>{k.name || "Unnamed key"}</strong> <code>{k.start ?? ""}…</code>
                  <br />
                  <span class="muted">
                    created {day(k.createdAt)} · {k.expiresAt ? `expires ${day(k.expiresAt)}` : "never expires"}
                  </span>
                </div>
                <form method="post" action="/account/api-keys/revoke">
                  <CsrfField token={view.viewer.csrf} />
                  <input type="hidden" name="id" value={k.id} />
                  <button type="submit" class="danger small" aria-label={`Revoke the key ${k.name || k.start || ""}`}>
                    Revoke
                  </button>
                </form>
              </li>
            ))}
          </ul>
        )}
        <hr class="divider" />
        <h3>Create a key</h3>
        <form method="post" action="/account/api-keys">
          <CsrfField token={view.viewer.csrf} />
          <Field name="name" id="field-key-name" label="Key name" value={m.keyName} autocomplete="off" maxlength={100} hint="What uses it, for example: deploy job" describedBy={m.keysError ? "keys-error" : null} />
          <div class="field">
            <label for="field-key-lifetime">Expires after</label>
            <select id="field-key-lifetime" name="lifetime">
              {KEY_LIFETIMES.map((l) => (
                <option value={l.value} selected={l.value === "90"}>
                  {l.label}
                </option>
              ))}
            </select>
          </div>
          <button type="submit">Create key</button>
        </form>
      </section>

      <PasskeysSection passkeys={view.passkeys} csrf={view.viewer.csrf} error={m.passkeysError} />
    </Layout>
  );
}

/**
 * The account page (issue 3): the profile name, the caller's sessions with revoke, and API keys
 * through better-auth's api-key plugin (listed, created and shown once, revoked).
 */
export function accountPages(app: ServiceApp, ctx: IamContext) {
  async function accountView(c: Context, principal: Principal, viewer: Viewer): Promise<AccountView> {
    const [row] = await ctx.db.select({ name: user.name, emailVerified: user.emailVerified, twoFactorEnabled: user.twoFactorEnabled }).from(user).where(eq(user.id, principal.userId));
    if (!row) throw unauthenticated();
    const [password] = await ctx.db
      .select({ id: account.id })
      .from(account)
      .where(and(eq(account.userId, principal.userId), eq(account.providerId, "credential"), isNotNull(account.password)));
    const memberships = (await membershipsOf(ctx.db, principal.userId)).map((m) => ({ ...m, active: m.orgId === principal.orgId }));
    const invitations = await pendingInvitationsFor(ctx.db, principal.email ?? "", ctx.clock.now());
    const listed = await callAuthLibraryAs(c, ctx, "GET", "/api-key/list");
    const apiKeys = listed.ok ? ((await listed.json()) as { apiKeys: ApiKeyItem[] }).apiKeys : null;
    apiKeys?.sort((a, b) => Date.parse(b.createdAt) - Date.parse(a.createdAt));
    return {
      viewer,
      principal,
      name: row.name,
      emailVerified: row.emailVerified,
      hasPassword: password !== undefined,
      twoFactorEnabled: row.twoFactorEnabled === true,
      memberships,
      invitations,
      sessions: await activeSessions(ctx, principal),
      apiKeys,
      passkeys: await passkeysOf(c, ctx),
    };
  }

  const flashKey = createHash("sha256").update(`account-created-key\n${ctx.session.secret}`).digest();
  const flashCookie = { path: "/account", httpOnly: true, sameSite: "Strict", secure: ctx.config.secureCookies } as const;

  function putCreatedKey(c: Context, created: { name: string; key: string }, sessionId: string | null) {
    const iv = randomBytes(12);
    const cipher = createCipheriv("aes-256-gcm", flashKey, iv);
    const sealed = Buffer.concat([cipher.update(JSON.stringify({ ...created, sessionId, at: ctx.clock.now().getTime() }), "utf8"), cipher.final()]);
    setCookie(c, CREATED_KEY_COOKIE, Buffer.concat([iv, cipher.getAuthTag(), sealed]).toString("base64url"), { ...flashCookie, maxAge: CREATED_KEY_SECONDS });
  }

  /** The key this session created just before, once: the cookie is spent by reading it. */
  function takeCreatedKey(c: Context, sessionId: string | null): { name: string; key: string } | null {
    const value = getCookie(c, CREATED_KEY_COOKIE);
    if (!value) return null;
    deleteCookie(c, CREATED_KEY_COOKIE, flashCookie);
    try {
      const raw = Buffer.from(value, "base64url");
      const decipher = createDecipheriv("aes-256-gcm", flashKey, raw.subarray(0, 12));
      decipher.setAuthTag(raw.subarray(12, 28));
      const opened = JSON.parse(Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString("utf8")) as { name: string; key: string; sessionId: string | null; at: number };
      if (opened.sessionId !== sessionId || ctx.clock.now().getTime() - opened.at > CREATED_KEY_SECONDS * 1000) return null;
      return { name: opened.name, key: opened.key };
    } catch {
      // not sealed by us (edited, or from before a secret change): nothing to show
      return null;
    }
  }

  const show = async (c: Context, principal: Principal, viewer: Viewer, messages: AccountMessages = {}, status: 200 | 400 | 404 | 429 | 500 = 200) =>
    render(c, <AccountPage view={await accountView(c, principal, viewer)} messages={messages} />, status);
  passkeyAccountRoutes(app, ctx, show);

  // where a signed-in person lands (sign-in without a return address, the brand link): someone in no
  // organization starts by setting one up
  app.get(
    "/",
    page(ctx, async (c) => {
      // asked without taking the page's one-time notice: the page this sends to shows it
      const token = cookieSessionToken(c, ctx);
      const principal = token ? await ctx.principals.bySessionToken(token) : null;
      if (!principal) return c.redirect("/sign-in", 302);
      // a notice about the account (a magic link took its password) is read where the password is set
      if (getCookie(c, REVOKED_NOTICE_COOKIE)) return c.redirect("/account", 302);
      const memberships = await membershipsOf(ctx.db, principal.userId);
      return c.redirect(memberships.length === 0 ? "/onboarding" : "/account", 302);
    }),
  );

  app.get(
    "/account",
    page(ctx, async (c) => {
      const session = await pageSession(c, ctx);
      if (!session) return c.redirect(signInAddress("/account"), 302);
      const createdKey = takeCreatedKey(c, session.principal.sessionId);
      const view = await accountView(c, session.principal, session.viewer);
      const switched = c.req.query("switched");
      const [key, value] = ["saved", "created", "revoked", "sent", "changed"].map((k) => [k, c.req.query(k)] as const).find(([, v]) => v) ?? [];
      const active = view.memberships.find((m) => m.active);
      const notice = switched && active?.slug === switched ? `You now act in ${active.name} (${active.slug}) in this browser.` : key ? NOTICES[`${key}:${value}`] : null;
      return render(c, <AccountPage view={view} messages={{ notice, createdKey }} />);
    }),
  );

  app.post(
    "/account/organization",
    page(ctx, async (c) => {
      const { caller, form, viewer } = await sessionForm(c, ctx);
      const slug = form.slug ?? "";
      const memberships = await membershipsOf(ctx.db, caller.principal.userId);
      // the library would say the same; asking first keeps its wording off the page
      if (!memberships.some((m) => m.slug === slug)) return show(c, caller.principal, viewer, { orgError: "You are not a member of that organization." }, 404);
      const answer = await callAuthLibraryAs(c, ctx, "POST", "/organization/set-active", { organizationSlug: slug });
      if (!answer.ok) return show(c, caller.principal, viewer, { orgError: await libraryRefusal(c, answer) }, answer.status === 429 ? 429 : 400);
      return c.redirect(`/account?switched=${encodeURIComponent(slug)}#organizations`, 303);
    }),
  );

  app.post(
    "/account/sessions/revoke-others",
    page(ctx, async (c) => {
      const { caller } = await sessionForm(c, ctx);
      await revokeOtherSessions(c, ctx, caller.principal);
      return c.redirect("/account?revoked=others", 303);
    }),
  );

  app.post(
    "/account/profile",
    page(ctx, async (c) => {
      const { caller, form, viewer } = await sessionForm(c, ctx);
      const parsed = ProfileInput.safeParse({ name: (form.name ?? "").trim() });
      if (!parsed.success) return show(c, caller.principal, viewer, { nameError: "Give a name of 1 to 100 characters." }, 400);
      await updateProfile(c, ctx, caller.principal, parsed.data);
      return c.redirect("/account?saved=profile", 303);
    }),
  );

  /** A button that has the library mail the viewer a link: the notice once sent, or the refusal on the page. */
  const mailingLink = (libraryPath: string, refusalIn: "verifyError" | "passwordError", sent: string) =>
    page(ctx, async (c) => {
      const { caller, viewer } = await sessionForm(c, ctx);
      const answer = await callAuthLibraryAs(c, ctx, "POST", libraryPath, { email: caller.principal.email });
      if (!answer.ok) return show(c, caller.principal, viewer, { [refusalIn]: await libraryRefusal(c, answer) }, answer.status === 429 ? 429 : 400);
      return c.redirect(`/account?sent=${sent}`, 303);
    });

  app.post("/account/verify-email", mailingLink("/send-verification-email", "verifyError", "verification"));
  // an account without a password (magic links only) sets one through the reset mail: proof of the mailbox
  app.post("/account/password-link", mailingLink("/request-password-reset", "passwordError", "password-link"));

  app.post(
    "/account/password",
    page(ctx, async (c) => {
      const { caller, form, viewer } = await sessionForm(c, ctx);
      const current = form.current ?? "";
      const password = form.password ?? "";
      const signOutOthers = form.signOutOthers === "yes";
      if (!current) return show(c, caller.principal, viewer, { passwordError: "Enter your current password." }, 400);
      if (password.length < PASSWORD.min || password.length > PASSWORD.max) {
        return show(c, caller.principal, viewer, { passwordError: `Use a new password of ${PASSWORD.min} to ${PASSWORD.max} characters.` }, 400);
      }
      const answer = await callAuthLibraryAs(c, ctx, "POST", "/change-password", { currentPassword: current, newPassword: password, revokeOtherSessions: signOutOthers });
      if (!answer.ok) return show(c, caller.principal, viewer, { passwordError: await libraryRefusal(c, answer) }, answer.status === 429 ? 429 : 400);
      // signing the others out gives this browser a new session: its cookie comes with the answer
      return redirectWithCookies(c, answer, `/account?changed=${signOutOthers ? "password-others" : "password"}`);
    }),
  );

  app.post(
    "/account/sessions/revoke",
    page(ctx, async (c) => {
      const { caller, form, viewer } = await sessionForm(c, ctx);
      const id = form.id ?? "";
      try {
        await revokeSession(c, ctx, caller.principal, id);
      } catch (err) {
        if (!(err instanceof ApiError && err.status === 404)) throw err;
        return show(c, caller.principal, viewer, { sessionsError: "That session is not one of yours, or it has ended already." }, 404);
      }
      if (id !== caller.principal.sessionId) return c.redirect("/account?revoked=session", 303);
      // this browser's own session: it is signed out now
      deleteCookie(c, sessionCookieName(ctx.config.secureCookies), { path: "/", secure: ctx.config.secureCookies });
      return c.redirect("/sign-in?signed_out=1", 303);
    }),
  );

  app.post(
    "/account/api-keys",
    page(ctx, async (c) => {
      const { caller, form, viewer } = await sessionForm(c, ctx);
      const name = (form.name ?? "").trim();
      const lifetime = KEY_LIFETIMES.find((l) => l.value === form.lifetime);
      if (!name || name.length > 100 || !lifetime) {
        return show(c, caller.principal, viewer, { keysError: "Give the key a name of 1 to 100 characters and choose when it expires.", keyName: name.slice(0, 100) }, 400);
      }
      const expiresIn = lifetime.value === "never" ? null : Number(lifetime.value) * 86_400;
      const answer = await callAuthLibraryAs(c, ctx, "POST", "/api-key/create", { name, expiresIn });
      if (!answer.ok) return show(c, caller.principal, viewer, { keysError: await libraryRefusal(c, answer), keyName: name }, answer.status === 429 ? 429 : 400);
      const created = (await answer.json()) as { key: string };
      // POST/redirect/GET: the key rides to the next page sealed in a short-lived cookie, shown once;
      // a reload of that page shows the list, and never makes a second key
      putCreatedKey(c, { name, key: created.key }, caller.principal.sessionId);
      return c.redirect("/account#keys-heading", 303);
    }),
  );

  app.post(
    "/account/api-keys/revoke",
    page(ctx, async (c) => {
      const { caller, form, viewer } = await sessionForm(c, ctx);
      const answer = await callAuthLibraryAs(c, ctx, "POST", "/api-key/delete", { keyId: form.id ?? "" });
      if (!answer.ok) return show(c, caller.principal, viewer, { keysError: "That key is not one of yours, or it is revoked already." }, 404);
      return c.redirect("/account?revoked=key", 303);
    }),
  );
}
