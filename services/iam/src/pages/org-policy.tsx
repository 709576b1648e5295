import type { Principal } from "@core/service-auth";
import { ApiError, type ServiceApp } from "@core/kit";
import type { IamContext } from "../app.js";
import { policyOf, type OrgPolicy } from "../org-policy.js";
import { membershipsOf } from "../organizations.js";
import { updatePolicy } from "../routes/org-policy.js";
import { Alert, CsrfField, Layout, type Viewer } from "./layout.js";
import { page, pageSession, render, sessionForm, signInAddress } from "./page.js";

export const POLICY_PAGE = "/account/organization-policy";

interface PolicyView {
  viewer: Viewer;
  org: { name: string; slug: string; isOwner: boolean } | null;
  policy: OrgPolicy;
  notice?: string | null;
  error?: string | null;
}

function PolicyPage(props: PolicyView) {
  const { org, policy } = props;
  return (
    <Layout title="Organization security policy" viewer={props.viewer}>
      {props.notice ? <Alert kind="success">{props.notice}</Alert> : null}
      {props.error ? (
        <Alert kind="error" id="policy-error">
          {props.error}
        </Alert>
      ) : null}
      {org === null ? (
        <div class="card">
          <p>This browser acts in no organization.</p>
        </div>
      ) : (
        <section class="card" aria-labelledby="policy-heading">
          <h2 id="policy-heading">
            {org.name} <code>{org.slug}</code>
          </h2>
          <p>What every member's sign-in must include to act in this organization. API keys and service tokens are not affected.</p>
          {org.isOwner ? (
            <form method="post" action={POLICY_PAGE}>
              <CsrfField token={props.viewer.csrf} />
              <div class="field">
                <label>
                  <input type="checkbox" name="requireTwoFactor" value="yes" checked={policy.requireTwoFactor} /> Require two-factor authentication (a code after the password or emailed link, or a passkey)
                </label>
              </div>
              <div class="field">
                <label>
                  <input type="checkbox" name="requireSso" value="yes" checked={policy.requireSso} /> Require signing in through the organization's single sign-on provider
                </label>
              </div>
              <button type="submit">Save policy</button>
            </form>
          ) : (
            <ul>
              <li>Two-factor authentication: {policy.requireTwoFactor ? "required" : "not required"}</li>
              <li>Single sign-on: {policy.requireSso ? "required" : "not required"}</li>
              <li class="muted">Only the organization's owners change this.</li>
            </ul>
          )}
        </section>
      )}
      <p>
        <a href="/account#organizations">Back to your account</a>
      </p>
    </Layout>
  );
}

/** The policy of the organization this browser acts in: shown to members, set by owners (routes/org-policy.ts does the work). */
export function orgPolicyPages(app: ServiceApp, ctx: IamContext) {
  async function view(principal: Principal, viewer: Viewer, extra: Partial<PolicyView> = {}): Promise<PolicyView> {
    const active = (await membershipsOf(ctx.db, principal.userId)).find((m) => m.orgId === principal.orgId);
    if (!active) return { viewer, org: null, policy: { requireTwoFactor: false, requireSso: false }, ...extra };
    const isOwner = (active.role ?? "").split(",").includes("owner");
    return { viewer, org: { name: active.name, slug: active.slug, isOwner }, policy: await policyOf(ctx.db, active.orgId), ...extra };
  }

  app.get(
    POLICY_PAGE,
    page(ctx, async (c) => {
      const session = await pageSession(c, ctx);
      if (!session) return c.redirect(signInAddress(POLICY_PAGE), 302);
      return render(c, <PolicyPage {...await view(session.principal, session.viewer, { notice: c.req.query("saved") ? "The policy is saved and in force." : null })} />);
    }),
  );

  app.post(
    POLICY_PAGE,
    page(ctx, async (c) => {
      const { caller, form, viewer } = await sessionForm(c, ctx);
      const orgId = caller.principal.orgId;
      if (!orgId) return render(c, <PolicyPage {...await view(caller.principal, viewer)} />, 400);
      const policy = { requireTwoFactor: form.requireTwoFactor === "yes", requireSso: form.requireSso === "yes" };
      try {
        await updatePolicy(c, ctx, caller.principal, orgId, policy);
      } catch (err) {
        if (!(err instanceof ApiError) || (err.status !== 403 && err.status !== 409)) throw err;
        return render(c, <PolicyPage {...await view(caller.principal, viewer, { error: `${err.message}.` })} />, err.status);
      }
      return c.redirect(`${POLICY_PAGE}?saved=1`, 303);
    }),
  );
}
