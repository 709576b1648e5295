import type { ServiceApp } from "@core/kit";
import type { IamContext } from "../app.js";
import { callAuthLibraryAs } from "../auth-library.js";
import { MessagePage } from "./layout.js";
import { page, pageSession, render } from "./page.js";

/**
 * The page the verification mail links to (issue 10 §3): it confirms the address through the
 * library's own route and says so. A link opened twice says the address is confirmed; a wrong or
 * expired one says how to get a new one.
 */
export function verifyEmailPages(app: ServiceApp, ctx: IamContext) {
  app.get(
    "/verify-email",
    page(ctx, async (c) => {
      const session = await pageSession(c, ctx);
      const token = c.req.query("token") ?? "";
      const answer = token
        ? await callAuthLibraryAs(c, ctx, "GET", `/verify-email?token=${encodeURIComponent(token)}`)
        : null;
      if (answer?.status === 429) {
        return render(c, <MessagePage title="Too many attempts" kind="error" message={`Wait ${answer.headers.get("retry-after") ?? 60} seconds, then open the link again.`} />, 429);
      }
      if (!answer?.ok) {
        const again = session
          ? { href: "/account", label: "Send a new link from your account" }
          : { href: "/sign-in?next=%2Faccount", label: "Sign in to send a new link" };
        return render(
          c,
          <MessagePage title="Confirm your email address" viewer={session?.viewer} kind="error" message="This confirmation link is invalid or expired." next={again} />,
          400,
        );
      }
      return render(
        c,
        <MessagePage
          title="Your email address is confirmed"
          viewer={session?.viewer}
          kind="success"
          message="Thank you. Signing in with an emailed link now keeps your password and your other sessions."
          next={session ? { href: "/account", label: "Go to your account" } : { href: "/sign-in", label: "Sign in" }}
        />,
      );
    }),
  );
}
