import type { Context } from "hono";
import type { ServiceApp } from "@core/kit";
import type { IamContext } from "../app.js";
import { callAuthLibraryAs } from "../auth-library.js";
import { invitationById, type InvitationView } from "../invitation-view.js";
import { Alert, CsrfField, Layout, MessagePage, type Viewer } from "./layout.js";
import { libraryRefusal, page, pageSession, render, sessionForm, signInAddress } from "./page.js";

/** invitation ids are the library's (32 letters and digits); nothing longer is looked up */
const ID = /^[A-Za-z0-9_-]{1,128}$/;

const day = (d: Date) => d.toISOString().slice(0, 10);
const article = (role: string) => (/^[aeiou]/.test(role) ? "an" : "a");

/** "Ada Lovelace (ada@example.com) invites you to Acme as an admin." */
function Invite(props: { invitation: InvitationView }) {
  const { invitation } = props;
  return (
    <p>
      <strong>{invitation.inviter.name}</strong> ({invitation.inviter.email}) invites <strong>{invitation.email}</strong> to{" "}
      <strong>{invitation.organization.name}</strong> {`(${invitation.organization.slug})`} as {article(invitation.role)} <strong>{invitation.role}</strong>.
    </p>
  );
}

function AnswerPage(props: { viewer: Viewer; invitation: InvitationView; error?: string | null }) {
  const { invitation } = props;
  const action = `/invitations/${invitation.id}`;
  return (
    <Layout title={`Join ${invitation.organization.name}?`} viewer={props.viewer}>
      <div class="card">
        {props.error ? (
          <Alert kind="error" id="invitation-error">
            {props.error}
          </Alert>
        ) : null}
        <Invite invitation={invitation} />
        <p class="muted">The invitation is open until {day(invitation.expiresAt)}. Accepting makes this browser act in {invitation.organization.name}.</p>
        <div class="actions">
          <form method="post" action={`${action}/accept`} class="inline">
            <CsrfField token={props.viewer.csrf} />
            <button type="submit">Accept</button>
          </form>
          <form method="post" action={`${action}/decline`} class="inline">
            <CsrfField token={props.viewer.csrf} />
            <button type="submit" class="secondary">
              Decline
            </button>
          </form>
        </div>
      </div>
    </Layout>
  );
}

function SignedOutPage(props: { invitation: InvitationView }) {
  const { invitation } = props;
  const back = encodeURIComponent(`/invitations/${invitation.id}`);
  return (
    <Layout title={`Join ${invitation.organization.name}?`}>
      <div class="card">
        <Invite invitation={invitation} />
        <p>
          To answer, sign in with <strong>{invitation.email}</strong>, or create an account with that address.
        </p>
        <p class="actions">
          <a href={`/sign-in?next=${back}`}>
            Sign in
          </a>{" "}
          <a href={`/sign-up?next=${back}`}>Create an account</a>
        </p>
      </div>
    </Layout>
  );
}

/** What an invitation that cannot be answered any more says, by its state. */
function closedMessage(invitation: InvitationView): { title: string; message: string } {
  const org = invitation.organization.name;
  switch (invitation.status) {
    case "accepted":
      return { title: "Invitation accepted", message: `This invitation to ${org} was accepted already.` };
    case "rejected":
      return { title: "Invitation declined", message: `This invitation to ${org} was declined. Ask ${invitation.inviter.name} (${invitation.inviter.email}) for a new one if you changed your mind.` };
    case "expired":
      return { title: "Invitation expired", message: `This invitation to ${org} expired on ${day(invitation.expiresAt)}. Ask ${invitation.inviter.name} (${invitation.inviter.email}) for a new one.` };
    default:
      return { title: "Invitation withdrawn", message: `This invitation to ${org} was withdrawn by the organization. Ask ${invitation.inviter.name} (${invitation.inviter.email}) if you expected to join.` };
  }
}

/**
 * The page an invitation mail links to (`/invitations/{id}`): who invites to what with which role,
 * then Accept or Decline for the invited address once signed in. Both post to the auth library's own
 * routes (accept-invitation, reject-invitation), so its checks and our audit apply, and answer with a
 * redirect to this page, which then says what happened.
 */
export function invitationPages(app: ServiceApp, ctx: IamContext) {
  const find = async (c: Context) => {
    const id = c.req.param("id") ?? "";
    return ID.test(id) ? invitationById(ctx.db, id, ctx.clock.now()) : null;
  };
  const notFoundPage = (c: Context, viewer: Viewer | null) =>
    render(c, <MessagePage title="Invitation not found" viewer={viewer} kind="error" message="No invitation has this address. Check the link in the mail, or ask for a new invitation." />, 404);

  app.get(
    "/invitations/:id",
    page(ctx, async (c) => {
      const session = await pageSession(c, ctx);
      const invitation = await find(c);
      if (!invitation) return notFoundPage(c, session?.viewer ?? null);
      const viewer = session?.viewer ?? null;
      if (c.req.query("answered") === "accepted" && invitation.status === "accepted" && session) {
        return render(
          c,
          <MessagePage
            title={`Welcome to ${invitation.organization.name}`}
            viewer={viewer}
            kind="success"
            message={`You joined ${invitation.organization.name} as ${article(invitation.role)} ${invitation.role}, and this browser now acts in it.`}
            next={{ href: "/account#organizations", label: "Your organizations" }}
          />,
        );
      }
      if (c.req.query("answered") === "declined" && invitation.status === "rejected") {
        return render(c, <MessagePage title="Invitation declined" viewer={viewer} kind="info" message={`You declined the invitation to ${invitation.organization.name}.`} next={session ? { href: "/account", label: "Your account" } : undefined} />);
      }
      if (invitation.status !== "pending") {
        const closed = closedMessage(invitation);
        return render(c, <MessagePage title={closed.title} viewer={viewer} kind={invitation.status === "accepted" ? "info" : "error"} message={closed.message} next={session ? { href: "/account", label: "Your account" } : undefined} />, invitation.status === "accepted" ? 200 : 410);
      }
      if (!session) return render(c, <SignedOutPage invitation={invitation} />);
      if (session.principal.email?.toLowerCase() !== invitation.email.toLowerCase()) {
        return render(
          c,
          <MessagePage
            title="This invitation is for someone else"
            viewer={viewer}
            kind="error"
            message={`The invitation is for ${invitation.email}, and you are signed in as ${session.principal.email}. Sign out, then sign in (or create an account) with ${invitation.email} to answer it.`}
            next={{ href: signInAddress(`/invitations/${invitation.id}`), label: `Sign in as ${invitation.email}` }}
          />,
          403,
        );
      }
      return render(c, <AnswerPage viewer={session.viewer} invitation={invitation} />);
    }),
  );

  const answer = (libraryPath: string, answered: "accepted" | "declined") =>
    page(ctx, async (c) => {
      const { viewer } = await sessionForm(c, ctx);
      const invitation = await find(c);
      if (!invitation) return notFoundPage(c, viewer);
      const reply = await callAuthLibraryAs(c, ctx, "POST", libraryPath, { invitationId: invitation.id });
      if (!reply.ok) {
        // the state may have moved on (revoked, expired, answered in another tab): the page says which
        const now = await invitationById(ctx.db, invitation.id, ctx.clock.now());
        if (now && now.status !== "pending") return c.redirect(`/invitations/${invitation.id}`, 303);
        return render(c, <AnswerPage viewer={viewer} invitation={invitation} error={await libraryRefusal(c, reply)} />, reply.status === 429 ? 429 : 400);
      }
      // accepting changed the session's organization: the principal caches must not keep the old one
      ctx.forgetPrincipals();
      return c.redirect(`/invitations/${invitation.id}?answered=${answered}`, 303);
    });

  app.post("/invitations/:id/accept", answer("/organization/accept-invitation", "accepted"));
  app.post("/invitations/:id/decline", answer("/organization/reject-invitation", "declined"));
}
