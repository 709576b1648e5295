import type { Context } from "hono";
import { raw } from "hono/html";
import { renderSVG } from "uqr";
import { eq } from "drizzle-orm";
import type { ServiceApp } from "@core/kit";
import type { IamContext } from "../app.js";
import { callAuthLibraryAs } from "../auth-library.js";
import { user } from "../db/schema.js";
import { TWO_FACTOR_PAGE } from "../two-factor.js";
import { csrfToken, ensureBrowserBinding } from "./csrf.js";
import { Alert, CsrfField, Field, Layout, type Viewer } from "./layout.js";
import { browserForm, libraryRefusal, page, pageSession, redirectWithCookies, render, safeNext, sessionForm, signInAddress } from "./page.js";

/** The address of the account's two-factor page (where a policy sends a member to enrol). */
export const TWO_FACTOR_ACCOUNT_PAGE = "/account/two-factor";

/** What /account shows of two-factor: on or off, and the page that changes it. */
export function TwoFactorSummary(props: { enabled: boolean }) {
  return (
    <section class="card" aria-labelledby="two-factor-heading" id="two-factor">
      <h2 id="two-factor-heading">Two-factor authentication</h2>
      {props.enabled ? (
        <p>
          <span class="badge">On</span> Signing in asks for a code from your authenticator app after your password or emailed link.
        </p>
      ) : (
        <p>
          <span class="badge warn">Off</span> Add a code from an authenticator app to your password, so a stolen password alone cannot sign you in.
        </p>
      )}
      <p>
        <a href={TWO_FACTOR_ACCOUNT_PAGE}>{props.enabled ? "Manage two-factor authentication" : "Set up two-factor authentication"}</a>
      </p>
      <p>
        <a href="/account/organization-policy">Your organization's security policy</a>
      </p>
    </section>
  );
}

/** The secret of a TOTP URI, as base32 in groups of four (what an app asks for when typed in). */
export const secretText = (totpURI: string) => (new URL(totpURI).searchParams.get("secret") ?? "").replace(/(.{4})/g, "$1 ").trim();

const CODE_HINT = "The 6-digit code from your authenticator app, or one of your backup codes (like abcde-12345).";

/** The backup codes, shown once with what to do with them. */
function BackupCodes(props: { codes: string[] }) {
  return (
    <section class="card" aria-labelledby="backup-heading">
      <h2 id="backup-heading">Your backup codes</h2>
      <Alert kind="info">
        Save these codes now, somewhere other than your phone (a password manager, or on paper): they are shown only this once. Each one signs you in
        once if you lose your authenticator app.
      </Alert>
      <ul class="backup-codes" id="backup-codes">
        {props.codes.map((code) => (
          <li>
            <code>{code}</code>
          </li>
        ))}
      </ul>
    </section>
  );
}

interface ManageProps {
  viewer: Viewer;
  enabled: boolean;
  notice?: string | null;
  error?: string | null;
  /** enrolment under way: the app's QR code and secret, then the confirming code */
  enrolment?: { totpURI: string } | null;
  backupCodes?: string[] | null;
}

function ManagePage(props: ManageProps) {
  const { viewer } = props;
  return (
    <Layout title="Two-factor authentication" viewer={viewer}>
      {props.notice ? <Alert kind="success">{props.notice}</Alert> : null}
      {props.error ? (
        <Alert kind="error" id="two-factor-error">
          {props.error}
        </Alert>
      ) : null}
      {props.backupCodes ? <BackupCodes codes={props.backupCodes} /> : null}
      {props.enrolment ? (
        <section class="card" aria-labelledby="scan-heading">
          <h2 id="scan-heading">1. Add Core to your authenticator app</h2>
          <p>Scan this QR code with your app (for example an authenticator app on your phone):</p>
          <div class="qr" role="img" aria-label="QR code of your two-factor secret">
            {raw(renderSVG(props.enrolment.totpURI, { pixelSize: 5 }))}
          </div>
          <p>Or type this secret into the app (time-based, 6 digits, 30 seconds):</p>
          <code class="secret" id="totp-secret">
            {secretText(props.enrolment.totpURI)}
          </code>
          <h2 id="confirm-heading">2. Confirm with a code</h2>
          <form method="post" action={`${TWO_FACTOR_ACCOUNT_PAGE}/confirm`}>
            <CsrfField token={viewer.csrf} />
            <Field name="code" label="Code from your app" autocomplete="one-time-code" maxlength={6} extra={{ inputmode: "numeric" }} autofocus describedBy={props.error ? "two-factor-error" : null} />
            <div class="field">
              <label>
                <input type="checkbox" name="signOutOthers" value="yes" checked /> Sign out my other sessions (command-line logins and connected apps included): they signed in without a code
              </label>
            </div>
            <button type="submit">Turn on two-factor</button>
          </form>
        </section>
      ) : props.enabled ? (
        <>
          <section class="card" aria-labelledby="regenerate-heading">
            <h2 id="regenerate-heading">New backup codes</h2>
            <p>Makes ten new backup codes; the old ones stop working. Give your password, so that a browser left signed in cannot take them.</p>
            <form method="post" action={`${TWO_FACTOR_ACCOUNT_PAGE}/backup-codes`}>
              <CsrfField token={viewer.csrf} />
              <Field name="password" id="field-regenerate-password" label="Password" type="password" autocomplete="current-password" maxlength={128} />
              <button type="submit" class="secondary">
                Make new backup codes
              </button>
            </form>
          </section>
          <section class="card" aria-labelledby="disable-heading">
            <h2 id="disable-heading">Turn two-factor off</h2>
            <p>Give your password and a code from your app or a backup code.</p>
            <form method="post" action={`${TWO_FACTOR_ACCOUNT_PAGE}/disable`}>
              <CsrfField token={viewer.csrf} />
              <Field name="password" id="field-disable-password" label="Password" type="password" autocomplete="current-password" maxlength={128} />
              <Field name="code" id="field-disable-code" label="Code" autocomplete="one-time-code" maxlength={11} hint={CODE_HINT} />
              <button type="submit" class="danger">
                Turn two-factor off
              </button>
            </form>
          </section>
        </>
      ) : (
        <section class="card" aria-labelledby="enable-heading">
          <h2 id="enable-heading">Set it up</h2>
          <p>You need an authenticator app. Give your password to start.</p>
          <form method="post" action={`${TWO_FACTOR_ACCOUNT_PAGE}/enable`}>
            <CsrfField token={viewer.csrf} />
            <Field name="password" label="Password" type="password" autocomplete="current-password" maxlength={128} />
            <button type="submit">Continue</button>
          </form>
        </section>
      )}
      <p>
        <a href="/account">Back to your account</a>
      </p>
    </Layout>
  );
}

function CodePage(props: { csrf: string; next: string | null; error?: string | null }) {
  return (
    <Layout title="Enter your code">
      <div class="card">
        <p>Your account uses two-factor authentication. Enter the code your authenticator app shows now.</p>
        <form method="post" action={TWO_FACTOR_PAGE}>
          <CsrfField token={props.csrf} />
          {props.next ? <input type="hidden" name="next" value={props.next} /> : null}
          {props.error ? (
            <Alert kind="error" id="code-error">
              {props.error}
            </Alert>
          ) : null}
          <Field name="code" label="Code" autocomplete="one-time-code" maxlength={11} hint={CODE_HINT} autofocus describedBy={props.error ? "code-error" : null} />
          <button type="submit">Verify</button>
        </form>
      </div>
      <p>
        <a href={props.next ? signInAddress(props.next) : "/sign-in"}>Start again</a>
      </p>
    </Layout>
  );
}

/** The library's refusal of a code, as a sentence. */
async function codeRefusal(c: Context, answer: Response): Promise<string> {
  if (answer.status === 429) return libraryRefusal(c, answer);
  const body = (await answer
    .clone()
    .json()
    .catch(() => ({}))) as { code?: string };
  switch (body.code) {
    case "INVALID_CODE":
    case "INVALID_BACKUP_CODE":
      return "That code is not right. Check your app's current code, or use an unused backup code.";
    case "TOTP_CODE_REUSED":
      return "That code was used already. Wait for the next code in your app.";
    case "INVALID_TWO_FACTOR_COOKIE":
      return "This sign-in has expired. Start again.";
    case "TOO_MANY_ATTEMPTS_REQUEST_NEW_CODE":
      return "Too many wrong codes for this sign-in. Start again.";
    case "ACCOUNT_TEMPORARILY_LOCKED":
      return "Too many wrong codes: two-factor sign-in is locked for 15 minutes.";
  }
  return libraryRefusal(c, answer);
}

const statusOf = (answer: Response) => (([400, 401, 403, 429] as const).find((s) => s === answer.status) ?? 400);

/** A code as the library takes it: six digits go to the TOTP check, anything else is a backup code. */
const codeRoute = (code: string) => (/^\d{6}$/.test(code) ? "/two-factor/verify-totp" : "/two-factor/verify-backup-code");

/**
 * Two-factor pages (issue 28): the second step of signing in, and enrolment, disabling and new
 * backup codes on the account. They post to the library's own routes server-side, so its checks,
 * rate limits, lockout and our hooks (replays, codes to disable) apply as on its JSON routes.
 */
export function twoFactorPages(app: ServiceApp, ctx: IamContext) {
  const browserCsrf = (c: Context) => csrfToken(ctx.session.secret, ensureBrowserBinding(c, ctx.config.secureCookies));

  app.get(
    TWO_FACTOR_PAGE,
    page(ctx, async (c) => render(c, <CodePage csrf={browserCsrf(c)} next={safeNext(c.req.query("next"), ctx.config.returnOrigins)} />)),
  );

  app.post(
    TWO_FACTOR_PAGE,
    page(ctx, async (c) => {
      const form = await browserForm(c, ctx);
      const next = safeNext(form.next, ctx.config.returnOrigins);
      const code = (form.code ?? "").replace(/\s/g, "").slice(0, 32);
      if (!code) return render(c, <CodePage csrf={browserCsrf(c)} next={next} error="Enter the code from your app, or a backup code." />, 400);
      const answer = await callAuthLibraryAs(c, ctx, "POST", codeRoute(code), { code });
      if (!answer.ok) return render(c, <CodePage csrf={browserCsrf(c)} next={next} error={await codeRefusal(c, answer)} />, statusOf(answer));
      return redirectWithCookies(c, answer, next ?? "/");
    }),
  );

  const enabledOf = async (userId: string) => {
    const [row] = await ctx.db.select({ enabled: user.twoFactorEnabled }).from(user).where(eq(user.id, userId));
    return row?.enabled === true;
  };

  const NOTICES: Record<string, string> = { off: "Two-factor authentication is off." };

  app.get(
    TWO_FACTOR_ACCOUNT_PAGE,
    page(ctx, async (c) => {
      const session = await pageSession(c, ctx);
      if (!session) return c.redirect(signInAddress(TWO_FACTOR_ACCOUNT_PAGE), 302);
      const notice = NOTICES[c.req.query("done") ?? ""] ?? (c.req.query("required") ? "Your organization requires two-factor authentication: set it up to go on." : null);
      return render(c, <ManagePage viewer={session.viewer} enabled={await enabledOf(session.principal.userId)} notice={notice} />);
    }),
  );

  app.post(
    `${TWO_FACTOR_ACCOUNT_PAGE}/enable`,
    page(ctx, async (c) => {
      const { caller, form, viewer } = await sessionForm(c, ctx);
      const enabled = await enabledOf(caller.principal.userId);
      if (!form.password) return render(c, <ManagePage viewer={viewer} enabled={enabled} error="Enter your password." />, 400);
      const answer = await callAuthLibraryAs(c, ctx, "POST", "/two-factor/enable", { password: form.password });
      if (!answer.ok) return render(c, <ManagePage viewer={viewer} enabled={enabled} error={await libraryRefusal(c, answer)} />, statusOf(answer));
      // the backup codes of this answer are not shown: they are shown once two-factor is confirmed on
      const { totpURI } = (await answer.json()) as { totpURI: string };
      return render(c, <ManagePage viewer={viewer} enabled={false} enrolment={{ totpURI }} />);
    }),
  );

  app.post(
    `${TWO_FACTOR_ACCOUNT_PAGE}/confirm`,
    page(ctx, async (c) => {
      const { caller, form, viewer } = await sessionForm(c, ctx);
      const code = (form.code ?? "").replace(/\s/g, "");
      const answer = await callAuthLibraryAs(c, ctx, "POST", "/two-factor/verify-totp", { code, revokeOtherSessions: form.signOutOthers === "yes" });
      if (!answer.ok) {
        const error = `${await codeRefusal(c, answer)} If the app has no Core entry yet, start again.`;
        return render(c, <ManagePage viewer={viewer} enabled={await enabledOf(caller.principal.userId)} error={error} />, statusOf(answer));
      }
      // confirming replaced this browser's session (it is now one with a second factor): new cookie,
      // and the page's forms are bound to the new session
      for (const cookie of answer.headers.getSetCookie()) c.header("set-cookie", cookie, { append: true });
      const token = ((await answer.json()) as { token?: string }).token ?? caller.token;
      const newViewer = { ...viewer, csrf: csrfToken(ctx.session.secret, { kind: "session", value: token }) };
      // the codes the plugin made at enrolment, read once here for the page (they stay encrypted at rest)
      const { backupCodes } = await ctx.auth.api.viewBackupCodes({ body: { userId: caller.principal.userId } });
      return render(c, <ManagePage viewer={newViewer} enabled notice="Two-factor authentication is on." backupCodes={backupCodes} />);
    }),
  );

  app.post(
    `${TWO_FACTOR_ACCOUNT_PAGE}/backup-codes`,
    page(ctx, async (c) => {
      const { caller, form, viewer } = await sessionForm(c, ctx);
      if (!form.password) return render(c, <ManagePage viewer={viewer} enabled error="Enter your password." />, 400);
      const answer = await callAuthLibraryAs(c, ctx, "POST", "/two-factor/generate-backup-codes", { password: form.password });
      if (!answer.ok) return render(c, <ManagePage viewer={viewer} enabled={await enabledOf(caller.principal.userId)} error={await libraryRefusal(c, answer)} />, statusOf(answer));
      const { backupCodes } = (await answer.json()) as { backupCodes: string[] };
      return render(c, <ManagePage viewer={viewer} enabled notice="New backup codes are made; the old ones no longer work." backupCodes={backupCodes} />);
    }),
  );

  app.post(
    `${TWO_FACTOR_ACCOUNT_PAGE}/disable`,
    page(ctx, async (c) => {
      const { form, viewer } = await sessionForm(c, ctx);
      const code = (form.code ?? "").replace(/\s/g, "");
      if (!form.password || !code) return render(c, <ManagePage viewer={viewer} enabled error="Enter your password and a code." />, 400);
      const answer = await callAuthLibraryAs(c, ctx, "POST", "/two-factor/disable", { password: form.password, code });
      if (!answer.ok) {
        const error = answer.status === 401 ? await codeRefusal(c, answer) : await libraryRefusal(c, answer);
        return render(c, <ManagePage viewer={viewer} enabled error={error} />, statusOf(answer));
      }
      return redirectWithCookies(c, answer, `${TWO_FACTOR_ACCOUNT_PAGE}?done=off`);
    }),
  );
}
