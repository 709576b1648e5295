import type { Context } from "hono";
import type { ServiceApp } from "@core/kit";
import type { IamContext } from "../app.js";
import { callAuthLibraryAs } from "../auth-library.js";
import { csrfToken, ensureBrowserBinding } from "./csrf.js";
import { Alert, CsrfField, Field, Layout, MessagePage } from "./layout.js";
import { browserForm, libraryRefusal, page, render } from "./page.js";

const PASSWORD = { min: 8, max: 128 };

/** The token of signed-out forms, bound to this browser's CSRF cookie (set now if missing). */
const browserCsrf = (c: Context, ctx: IamContext) => csrfToken(ctx.session.secret, ensureBrowserBinding(c, ctx.config.secureCookies));

function ForgotPasswordPage(props: { csrf: string; email?: string; error?: string | null }) {
  return (
    <Layout title="Forgot your password?">
      <div class="card">
        <p>Enter the address you sign in with. We mail you a link to set a new password; it works once, for 1 hour.</p>
        {props.error ? (
          <Alert kind="error" id="forgot-error">
            {props.error}
          </Alert>
        ) : null}
        <form method="post" action="/forgot-password">
          <CsrfField token={props.csrf} />
          <Field name="email" label="Email" type="email" autocomplete="username" value={props.email} autofocus maxlength={320} describedBy={props.error ? "forgot-error" : null} />
          <button type="submit">Email me a link</button>
        </form>
      </div>
      <p>
        Remembered it? <a href="/sign-in">Sign in</a>
      </p>
    </Layout>
  );
}

function ResetPasswordPage(props: { csrf: string; token: string; error?: string | null }) {
  return (
    <Layout title="Set a new password">
      <div class="card">
        <p>Setting a new password signs every session of your account out, command-line logins included.</p>
        {props.error ? (
          <Alert kind="error" id="reset-error">
            {props.error}
          </Alert>
        ) : null}
        <form method="post" action="/reset-password">
          <CsrfField token={props.csrf} />
          <input type="hidden" name="token" value={props.token} />
          <Field name="password" label="New password" type="password" autocomplete="new-password" minlength={PASSWORD.min} maxlength={PASSWORD.max} hint={`At least ${PASSWORD.min} characters.`} autofocus describedBy={props.error ? "reset-error" : null} />
          <Field name="repeat" label="New password again" type="password" autocomplete="new-password" minlength={PASSWORD.min} maxlength={PASSWORD.max} />
          <button type="submit">Set password</button>
        </form>
      </div>
    </Layout>
  );
}

const LINK_REFUSED = "This link is invalid, used or expired. Ask for a new one.";

/**
 * Forgot-password and reset pages (issue 10 §3, DESIGN §4): better-auth's own routes behind pages,
 * as sign-in is. The mail says nothing about whether an account exists; a reset signs every session
 * out and says so, and the owner gets a mail that the password changed.
 */
export function passwordPages(app: ServiceApp, ctx: IamContext) {
  app.get(
    "/forgot-password",
    page(ctx, async (c) => render(c, <ForgotPasswordPage csrf={browserCsrf(c, ctx)} />)),
  );

  app.post(
    "/forgot-password",
    page(ctx, async (c) => {
      const form = await browserForm(c, ctx);
      const email = (form.email ?? "").trim().slice(0, 320);
      if (!email) return render(c, <ForgotPasswordPage csrf={browserCsrf(c, ctx)} error="Enter your email address." />, 400);
      const answer = await callAuthLibraryAs(c, ctx, "POST", "/request-password-reset", { email });
      if (!answer.ok) {
        return render(c, <ForgotPasswordPage csrf={browserCsrf(c, ctx)} email={email} error={await libraryRefusal(c, answer)} />, answer.status === 429 ? 429 : 400);
      }
      return render(
        c,
        <MessagePage
          title="Check your email"
          kind="success"
          message={
            <>
              If <strong>{email}</strong> has an account, a link to set a new password is on its way. It works once, for 1 hour.
            </>
          }
          next={{ href: "/sign-in", label: "Back to sign-in" }}
        />,
      );
    }),
  );

  app.get(
    "/reset-password",
    page(ctx, async (c) => {
      const token = c.req.query("token") ?? "";
      if (!token) return render(c, <MessagePage title="Set a new password" kind="error" message={LINK_REFUSED} next={{ href: "/forgot-password", label: "Ask for a new link" }} />, 400);
      return render(c, <ResetPasswordPage csrf={browserCsrf(c, ctx)} token={token} />);
    }),
  );

  app.post(
    "/reset-password",
    page(ctx, async (c) => {
      const form = await browserForm(c, ctx);
      const token = form.token ?? "";
      const password = form.password ?? "";
      const again = (status: 400 | 429, error: string) => render(c, <ResetPasswordPage csrf={browserCsrf(c, ctx)} token={token} error={error} />, status);
      if (password.length < PASSWORD.min || password.length > PASSWORD.max) return again(400, `Use a password of ${PASSWORD.min} to ${PASSWORD.max} characters.`);
      if (password !== form.repeat) return again(400, "The two passwords differ. Type the same password twice.");
      const answer = await callAuthLibraryAs(c, ctx, "POST", "/reset-password", { token, newPassword: password });
      if (answer.status === 429) return again(429, await libraryRefusal(c, answer));
      if (!answer.ok) {
        const body = (await answer.clone().json().catch(() => ({}))) as { code?: string };
        if (body.code === "INVALID_TOKEN" || body.code === "USER_NOT_FOUND") {
          return render(c, <MessagePage title="Set a new password" kind="error" message={LINK_REFUSED} next={{ href: "/forgot-password", label: "Ask for a new link" }} />, 400);
        }
        return again(400, await libraryRefusal(c, answer));
      }
      return render(
        c,
        <MessagePage
          title="Your password is set"
          kind="success"
          message="For your safety every session of your account was signed out, this browser and command-line logins included. Sign in with the new password."
          next={{ href: "/sign-in", label: "Sign in" }}
        />,
      );
    }),
  );
}
