import { ApiError, type ServiceApp } from "@core/kit";
import type { IamContext } from "../app.js";
import { pendingInvitationsFor, type InvitationView } from "../invitation-view.js";
import { OrgSetupInput, setUpOrganization } from "../routes/org-setup.js";
import { PendingInvitations } from "./account.js";
import { Alert, CsrfField, Field, Layout, type Viewer } from "./layout.js";
import { page, pageFailure, pageSession, render, sessionForm, signInAddress } from "./page.js";

interface OnboardingErrors {
  name?: string;
  slug?: string;
  form?: string;
}

function OnboardingPage(props: { viewer: Viewer; invitations: InvitationView[]; name?: string; slug?: string; errors?: OnboardingErrors }) {
  const errors = props.errors ?? {};
  return (
    <Layout title="Set up your organization" viewer={props.viewer}>
      {props.invitations.length > 0 ? (
        <section class="card" aria-labelledby="invitations-heading">
          <h2 id="invitations-heading">Or join an organization that invited you</h2>
          <PendingInvitations invitations={props.invitations} />
        </section>
      ) : null}
      <div class="card">
        <p>This creates your organization and its platform, with you as the owner.</p>
        {errors.form ? (
          <Alert kind="error" id="setup-error">
            {errors.form}
          </Alert>
        ) : null}
        <form method="post" action="/onboarding">
          <CsrfField token={props.viewer.csrf} />
          <Field name="name" label="Organization name" value={props.name} autocomplete="organization" maxlength={100} autofocus={!errors.slug} error={errors.name} />
          <Field
            name="slug"
            label="Slug"
            value={props.slug}
            autocomplete="off"
            maxlength={63}
            pattern="[a-z0-9\-]+"
            hint="Lowercase letters, digits and hyphens, up to 63 characters. It names your platform and cannot be changed."
            error={errors.slug}
            autofocus={!!errors.slug}
            extra={{ autocapitalize: "none", spellcheck: "false" }}
          />
          <button type="submit">Create organization</button>
        </form>
        <p class="muted">
          Invited to an organization? Open the link in the invitation mail. <a href="/account">Not now: go to your account</a>
        </p>
      </div>
    </Layout>
  );
}

const FIELD_MESSAGES = {
  name: "Give a name of 1 to 100 characters.",
  slug: "Use 1 to 63 lowercase letters, digits or hyphens.",
};

/** The org-setup form (spec §4.3 `POST /api/core/org-setup`): the same checks and the same logic. */
export function onboardingPages(app: ServiceApp, ctx: IamContext) {
  const invitationsOf = (email: string | null) => pendingInvitationsFor(ctx.db, email ?? "", ctx.clock.now());

  app.get(
    "/onboarding",
    page(ctx, async (c) => {
      const session = await pageSession(c, ctx);
      if (!session) return c.redirect(signInAddress("/onboarding"), 302);
      return render(c, <OnboardingPage viewer={session.viewer} invitations={await invitationsOf(session.principal.email)} />);
    }),
  );

  app.post(
    "/onboarding",
    page(ctx, async (c) => {
      const { caller, form, viewer } = await sessionForm(c, ctx);
      const entered = { name: (form.name ?? "").trim(), slug: (form.slug ?? "").trim() };
      const again = async (status: 400 | 409 | 502 | 503, errors: OnboardingErrors) =>
        render(c, <OnboardingPage viewer={viewer} invitations={await invitationsOf(caller.principal.email)} {...entered} errors={errors} />, status);
      const parsed = OrgSetupInput.safeParse(entered);
      if (!parsed.success) {
        const failing = new Set(parsed.error.issues.map((issue) => String(issue.path[0])));
        return again(400, {
          name: failing.has("name") ? FIELD_MESSAGES.name : undefined,
          slug: failing.has("slug") ? FIELD_MESSAGES.slug : undefined,
        });
      }
      try {
        await setUpOrganization(c, ctx, caller, parsed.data);
      } catch (err) {
        if (err instanceof ApiError && err.status === 409) return again(409, { slug: `The slug "${entered.slug}" is taken. Choose another.` });
        if (err instanceof ApiError && (err.status === 502 || err.status === 503)) {
          // the set-up stays open under this slug for its owner: sending the form again finishes it (org-setup.ts)
          return again(err.status, { form: "The platform could not be created just now. Send the form again in a moment to finish: the name is kept for you." });
        }
        return pageFailure(c, ctx, err, viewer);
      }
      return c.redirect("/account?created=organization", 303);
    }),
  );
}
