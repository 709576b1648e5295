import { ApiError, type ServiceApp } from "@core/kit";
import type { IamContext } from "../app.js";
import { displayUserCode, type DeviceRequest } from "../device-flow.js";
import { decideDeviceLogin, findDeviceLogin } from "../routes/oauth.js";
import { Alert, CsrfField, Field, Layout, MessagePage, type Viewer } from "./layout.js";
import { page, pageFailure, pageSession, render, sessionForm, signInAddress } from "./page.js";

/** user codes are 9 characters; anything much longer is not one */
const MAX_CODE_INPUT = 32;

function EnterCodeForm(props: { value?: string; invalid?: boolean }) {
  return (
    <form method="get" action="/device">
      <Field
        name="user_code"
        label="Code"
        value={props.value}
        autocomplete="one-time-code"
        hint="The 8 letters shown by core login, like BCDF-GHJK."
        maxlength={MAX_CODE_INPUT}
        autofocus
        describedBy={props.invalid ? "code-error" : null}
        extra={{ autocapitalize: "characters", spellcheck: "false" }}
      />
      <button type="submit">Continue</button>
    </form>
  );
}

function EnterCodePage(props: { viewer: Viewer }) {
  return (
    <Layout title="Connect a device" viewer={props.viewer}>
      <div class="card">
        <p>
          Enter the code that <code>core login</code> shows in your terminal.
        </p>
        <EnterCodeForm />
      </div>
    </Layout>
  );
}

function CodeNotFoundPage(props: { viewer: Viewer; value: string }) {
  return (
    <Layout title="Code not found or expired" viewer={props.viewer}>
      <div class="card">
        <Alert kind="error" id="code-error">
          No sign-in is waiting for this code. It may be mistyped, already used or expired.
        </Alert>
        <p>Check the code in your terminal, or run <code>core login</code> again for a new one.</p>
        <EnterCodeForm value={props.value} invalid />
      </div>
    </Layout>
  );
}

const utc = (date: Date) => `${date.toISOString().slice(0, 16).replace("T", " ")} UTC`;

/** "3 minutes ago", "in 9 minutes" */
function relative(date: Date, now: Date): string {
  const seconds = Math.round((date.getTime() - now.getTime()) / 1000);
  const size = Math.abs(seconds);
  const amount = size < 60 ? `${size} second${size === 1 ? "" : "s"}` : size < 7200 ? `${Math.round(size / 60)} minute${Math.round(size / 60) === 1 ? "" : "s"}` : `${Math.round(size / 3600)} hours`;
  if (size < 5) return "just now";
  return seconds < 0 ? `${amount} ago` : `in ${amount}`;
}

function ConfirmPage(props: { viewer: Viewer; request: DeviceRequest; now: Date }) {
  const { request, now } = props;
  const code = displayUserCode(request.userCode);
  return (
    <Layout title="Approve this sign-in?" viewer={props.viewer}>
      <div class="card">
        <p>
          A device is asking to sign in to Core as <strong>{props.viewer.email}</strong>. Check that this code matches the one in your terminal:
        </p>
        <p class="code">{code}</p>
        <dl class="facts">
          <dt>Program</dt>
          <dd>{request.requesterAgent || "not given"}</dd>
          <dt>From address</dt>
          <dd>{request.requesterIp || "unknown"}</dd>
          <dt>Asked</dt>
          <dd>
            <time datetime={request.createdAt.toISOString()}>{relative(request.createdAt, now)}</time> ({utc(request.createdAt)})
          </dd>
          <dt>Code expires</dt>
          <dd>
            <time datetime={request.expiresAt.toISOString()}>{relative(request.expiresAt, now)}</time>
          </dd>
        </dl>
        <p>Approve only if you started this sign-in yourself: the device will be able to act as you.</p>
        <form method="post" action="/device" class="actions">
          <CsrfField token={props.viewer.csrf} />
          <input type="hidden" name="user_code" value={code} />
          <button type="submit" name="decision" value="approve">
            Approve
          </button>
          <button type="submit" name="decision" value="deny" class="secondary">
            Deny
          </button>
        </form>
      </div>
    </Layout>
  );
}

/**
 * The activation page of the device flow (DESIGN §1, §5): sign in if needed, enter or confirm the
 * code, see what is asking, Approve or Deny. Lookups and answers with a wrong code count toward the
 * same per-user limit as the JSON routes (`decideDeviceLogin`), so the page is no way to guess codes.
 */
export function devicePages(app: ServiceApp, ctx: IamContext) {
  app.get(
    "/device",
    page(ctx, async (c) => {
      const entered = (c.req.query("user_code") ?? "").trim().slice(0, MAX_CODE_INPUT);
      const session = await pageSession(c, ctx);
      if (!session) return c.redirect(signInAddress(entered ? `/device?user_code=${encodeURIComponent(entered)}` : "/device"), 302);
      if (!entered) return render(c, <EnterCodePage viewer={session.viewer} />);
      try {
        const request = await findDeviceLogin(ctx, session.principal.userId, entered);
        return render(c, <ConfirmPage viewer={session.viewer} request={request} now={ctx.clock.now()} />);
      } catch (err) {
        if (err instanceof ApiError && err.status === 404) return render(c, <CodeNotFoundPage viewer={session.viewer} value={entered} />, 404);
        return pageFailure(c, ctx, err, session.viewer);
      }
    }),
  );

  app.post(
    "/device",
    page(ctx, async (c) => {
      const { caller, form, viewer } = await sessionForm(c, ctx);
      const entered = (form.user_code ?? "").trim().slice(0, MAX_CODE_INPUT);
      const decision = form.decision;
      if (decision !== "approve" && decision !== "deny") {
        return render(c, <MessagePage title="Choose Approve or Deny" viewer={viewer} kind="error" message="The form did not say whether to approve or deny." next={{ href: "/device", label: "Enter the code again" }} />, 400);
      }
      let decided: DeviceRequest;
      try {
        decided = await decideDeviceLogin(c, ctx, caller.principal, entered, decision === "approve");
      } catch (err) {
        if (err instanceof ApiError && err.status === 404) return render(c, <CodeNotFoundPage viewer={viewer} value={entered} />, 404);
        return pageFailure(c, ctx, err, viewer);
      }
      // POST/redirect/GET: the answer is a page of its own, so a reload shows it again
      return c.redirect(`/device/decided/${encodeURIComponent(decided.id)}`, 303);
    }),
  );

  app.get(
    "/device/decided/:id",
    page(ctx, async (c) => {
      const session = await pageSession(c, ctx);
      if (!session) return c.redirect(signInAddress("/device"), 302);
      const { viewer } = session;
      const decided = await ctx.deviceFlow.decidedBy(c.req.param("id") ?? "", session.principal.userId);
      if (!decided) {
        return render(c, <MessagePage title="No such sign-in" viewer={viewer} kind="error" message="This page shows a sign-in you approved or denied, and this one is not yours or does not exist." next={{ href: "/device", label: "Enter a code" }} />, 404);
      }
      if (decided.status === "denied") {
        return render(c, <MessagePage title="Request denied" viewer={viewer} kind="info" message="The device was not signed in. You can close this page." />);
      }
      return render(
        c,
        <MessagePage
          title="Device approved"
          viewer={viewer}
          kind="success"
          message={
            <>
              Device approved — you can return to your terminal. It is signed in as <strong>{viewer.email}</strong>.
            </>
          }
          next={{ href: "/account", label: "Your account and sessions" }}
        />,
      );
    }),
  );
}
