import type { Context } from "hono";
import type { ServiceApp } from "@core/kit";
import type { IamContext } from "../app.js";
import { callAuthLibraryAs } from "../auth-library.js";
import { csrfToken, ensureBrowserBinding } from "./csrf.js";
import { TWO_FACTOR_PAGE } from "../two-factor.js";
import { authorizeAfterSignIn } from "../oauth-provider.js";
import { Alert, CsrfField, Field, Layout, MessagePage } from "./layout.js";
import { PasskeySignIn } from "./passkeys.js";
import { browserForm, cookieSessionToken, isSignedIn, libraryCallback, libraryRefusal, page, redirectWithCookies, render, safeNext, sessionForm } from "./page.js";

type Notice = { kind: "error" | "success" | "info"; text: string } | null;

/** What every signed-out form starts with: its CSRF token, where to go afterwards, and its error. */
function SignedOutFormStart(props: { csrf: string; next: string | null; error?: string | null; errorId: string }) {
  return (
    <>
      <CsrfField token={props.csrf} />
      {props.next ? <input type="hidden" name="next" value={props.next} /> : null}
      {props.error ? (
        <Alert kind="error" id={props.errorId}>
          {props.error}
        </Alert>
      ) : null}
    </>
  );
}

/**
 * What asked for the sign-in, from where it leads afterwards: a person sent here by `core login`
 * should see that signing in is for approving the CLI. Only the path is read, never the code in it.
 */
export function purposeOf(next: string | null): string | null {
  const path = next?.split(/[?#]/)[0] ?? "";
  if (path === "/device" || path.startsWith("/device/")) return "Sign in to approve the Core CLI (core login) on your computer.";
  if (path.startsWith("/invitations/")) return "Sign in to answer your invitation: with the address it was sent to.";
  if (path === "/api/auth/oauth2/authorize" || path === "/oauth/consent") return "Sign in to let an app (an AI agent or editor) read the Core vault for you.";
  return null;
}

function SignInPage(props: { csrf: string; next: string | null; email?: string; notice?: Notice; passwordError?: string | null; linkError?: string | null }) {
  const nextQuery = props.next ? `?next=${encodeURIComponent(props.next)}` : "";
  const purpose = purposeOf(props.next);
  return (
    <Layout title="Sign in">
      {purpose ? (
        <p class="lead" id="sign-in-purpose">
          {purpose}
        </p>
      ) : null}
      {props.notice ? <Alert kind={props.notice.kind}>{props.notice.text}</Alert> : null}
      <section class="card" aria-labelledby="password-heading">
        <h2 id="password-heading">With your password</h2>
        <form method="post" action="/sign-in">
          <SignedOutFormStart csrf={props.csrf} next={props.next} error={props.passwordError} errorId="sign-in-error" />
          <Field name="email" label="Email" type="email" autocomplete="username" value={props.email} autofocus={!props.linkError} maxlength={320} describedBy={props.passwordError ? "sign-in-error" : null} />
          <Field name="password" label="Password" type="password" autocomplete="current-password" maxlength={128} describedBy={props.passwordError ? "sign-in-error" : null} />
          <button type="submit">Sign in</button>
        </form>
        <p>
          <a href="/forgot-password">Forgot your password?</a>
        </p>
      </section>
      <section class="card" aria-labelledby="link-heading">
        <h2 id="link-heading">Or with a link by email</h2>
        <form method="post" action="/sign-in/magic-link">
          <SignedOutFormStart csrf={props.csrf} next={props.next} error={props.linkError} errorId="link-error" />
          <Field name="email" label="Email for the sign-in link" type="email" autocomplete="email" value={props.linkError ? props.email : undefined} autofocus={!!props.linkError} maxlength={320} describedBy={props.linkError ? "link-error" : null} id="field-link-email" />
          <button type="submit" class="secondary">
            Email me a link
          </button>
        </form>
      </section>
      <PasskeySignIn next={props.next} />
      <p>
        <a href={`/sign-in/sso${nextQuery}`}>Sign in with your organization's single sign-on</a>
      </p>
      <p>
        New to Core? <a href={`/sign-up${nextQuery}`}>Create an account</a>
      </p>
    </Layout>
  );
}

function SignUpPage(props: { csrf: string; next: string | null; name?: string; email?: string; error?: string | null }) {
  const nextQuery = props.next ? `?next=${encodeURIComponent(props.next)}` : "";
  const describedBy = props.error ? "sign-up-error" : null;
  const purpose = purposeOf(props.next)?.replace(/^Sign in/, "Create your account");
  return (
    <Layout title="Create your account">
      {purpose ? (
        <p class="lead" id="sign-in-purpose">
          {purpose}
        </p>
      ) : null}
      <div class="card">
        <form method="post" action="/sign-up">
          <SignedOutFormStart csrf={props.csrf} next={props.next} error={props.error} errorId="sign-up-error" />
          <Field name="name" label="Your name" autocomplete="name" value={props.name} autofocus maxlength={100} />
          <Field name="email" label="Email" type="email" autocomplete="email" value={props.email} maxlength={320} describedBy={describedBy} />
          <Field name="password" label="Password" type="password" autocomplete="new-password" minlength={8} maxlength={128} hint="At least 8 characters." describedBy={describedBy} />
          <button type="submit">Create account</button>
        </form>
      </div>
      <p>
        Already have an account? <a href={`/sign-in${nextQuery}`}>Sign in</a>
      </p>
    </Layout>
  );
}

/** The token of signed-out forms, bound to this browser's CSRF cookie (set now if missing). */
const browserCsrf = (c: Context, ctx: IamContext) => csrfToken(ctx.session.secret, ensureBrowserBinding(c, ctx.config.secureCookies));

const text = (value: string | undefined, max: number) => (value ?? "").trim().slice(0, max);

/**
 * Sign-in (password or magic link), sign-up and sign-out pages. They post to us and we post to
 * better-auth's own routes server-side (spec §4.2), so the library's checks, rate limits and audit
 * apply as on its JSON routes, and every refusal becomes a sentence on the page.
 */
export function signInPages(app: ServiceApp, ctx: IamContext) {
  app.get(
    "/sign-in",
    page(ctx, async (c) => {
      // the OAuth provider's login page (oauth-provider.ts): back to authorize afterwards
      const oauthReturn = authorizeAfterSignIn(new URL(c.req.url).searchParams);
      const next = oauthReturn ?? safeNext(c.req.query("next"), ctx.config.returnOrigins);
      if (await isSignedIn(c, ctx)) return c.redirect(next ?? "/", 302);
      const notice: Notice = c.req.query("signed_out")
        ? { kind: "success", text: "You are signed out." }
        : c.req.query("error")
          ? { kind: "error", text: "That sign-in link is invalid, used or expired. Ask for a new one below." }
          : next
            ? { kind: "info", text: "Sign in to continue." }
            : null;
      return render(c, <SignInPage csrf={browserCsrf(c, ctx)} next={next} notice={notice} />);
    }),
  );

  app.post(
    "/sign-in",
    page(ctx, async (c) => {
      const form = await browserForm(c, ctx);
      const next = safeNext(form.next, ctx.config.returnOrigins);
      const email = text(form.email, 320);
      const password = form.password ?? "";
      const again = (status: 400 | 401 | 403 | 422 | 429 | 500, error: string) => render(c, <SignInPage csrf={browserCsrf(c, ctx)} next={next} email={email} passwordError={error} />, status);
      if (!email || !password) return again(400, "Enter your email address and your password.");
      const answer = await callAuthLibraryAs(c, ctx, "POST", "/sign-in/email", { email, password });
      if (!answer.ok) return again(statusOf(answer), await libraryRefusal(c, answer));
      // two-factor on: no session yet, the plugin's challenge cookie, and the code page (two-factor.tsx)
      if (((await answer.clone().json()) as { twoFactorRedirect?: boolean }).twoFactorRedirect) {
        return redirectWithCookies(c, answer, next ? `${TWO_FACTOR_PAGE}?next=${encodeURIComponent(next)}` : TWO_FACTOR_PAGE);
      }
      return redirectWithCookies(c, answer, next ?? "/");
    }),
  );

  app.post(
    "/sign-in/magic-link",
    page(ctx, async (c) => {
      const form = await browserForm(c, ctx);
      const next = safeNext(form.next, ctx.config.returnOrigins);
      const email = text(form.email, 320);
      if (!email) return render(c, <SignInPage csrf={browserCsrf(c, ctx)} next={next} linkError="Enter your email address." />, 400);
      const answer = await callAuthLibraryAs(c, ctx, "POST", "/sign-in/magic-link", {
        email,
        callbackURL: next ? libraryCallback(next) : "/",
        newUserCallbackURL: next ? libraryCallback(next) : "/onboarding",
        errorCallbackURL: next ? `/sign-in?next=${encodeURIComponent(next)}` : "/sign-in",
      });
      if (!answer.ok) {
        return render(c, <SignInPage csrf={browserCsrf(c, ctx)} next={next} email={email} linkError={await libraryRefusal(c, answer)} />, statusOf(answer));
      }
      return render(
        c,
        <MessagePage
          title="Check your email"
          kind="success"
          message={
            <>
              We sent a sign-in link to <strong>{email}</strong>. It works once, for 10 minutes.
            </>
          }
          next={{ href: next ? `/sign-in?next=${encodeURIComponent(next)}` : "/sign-in", label: "Back to sign-in" }}
        />,
      );
    }),
  );

  app.get(
    "/sign-up",
    page(ctx, async (c) => {
      const next = safeNext(c.req.query("next"), ctx.config.returnOrigins);
      if (await isSignedIn(c, ctx)) return c.redirect(next ?? "/", 302);
      return render(c, <SignUpPage csrf={browserCsrf(c, ctx)} next={next} />);
    }),
  );

  app.post(
    "/sign-up",
    page(ctx, async (c) => {
      const form = await browserForm(c, ctx);
      const next = safeNext(form.next, ctx.config.returnOrigins);
      const name = text(form.name, 100);
      const email = text(form.email, 320);
      const password = form.password ?? "";
      const again = (status: 400 | 401 | 403 | 422 | 429 | 500, error: string) =>
        render(c, <SignUpPage csrf={browserCsrf(c, ctx)} next={next} name={name} email={email} error={error} />, status);
      if (!name || !email || !password) return again(400, "Enter your name, your email address and a password.");
      const answer = await callAuthLibraryAs(c, ctx, "POST", "/sign-up/email", { name, email, password });
      if (!answer.ok) return again(statusOf(answer), await libraryRefusal(c, answer));
      // a new account has no organization yet: setting one up comes next, unless the user was on the way somewhere
      return redirectWithCookies(c, answer, next ?? "/onboarding");
    }),
  );

  app.post(
    "/sign-out",
    page(ctx, async (c) => {
      const token = cookieSessionToken(c, ctx);
      // nothing to end: the browser is signed out already
      if (!token || !(await ctx.principals.bySessionToken(token))) return c.redirect("/sign-in", 303);
      await sessionForm(c, ctx);
      const answer = await callAuthLibraryAs(c, ctx, "POST", "/sign-out", {});
      if (!answer.ok) return render(c, <MessagePage title="Sign-out failed" kind="error" message={await libraryRefusal(c, answer)} next={{ href: "/account", label: "Back to your account" }} />, statusOf(answer));
      return redirectWithCookies(c, answer, "/sign-in?signed_out=1");
    }),
  );
}

/** The library's status as a page status (its 4xx as they are, anything else 500). */
function statusOf(answer: Response): 400 | 401 | 403 | 422 | 429 | 500 {
  return ([400, 401, 403, 422, 429] as const).find((s) => s === answer.status) ?? 500;
}
