import { eq } from "drizzle-orm";
import type { ServiceApp } from "@core/kit";
import type { IamContext } from "../app.js";
import { callAuthLibraryAs } from "../auth-library.js";
import { oauthClient, organization } from "../db/schema.js";
import { CLIENT_METADATA_DISCOVERY } from "../client-metadata.js";
import { CONSENT_PAGE, SCOPE_WORDS } from "../oauth-provider.js";
import { Alert, CsrfField, Layout, MessagePage, type Viewer } from "./layout.js";
import { page, pageSession, render, sessionForm, signInAddress } from "./page.js";

/** The signed authorization request the plugin sends to the consent page is at most this long. */
const MAX_QUERY = 4096;

/** What the consent page shows about a request. */
export interface ConsentRequest {
  clientName: string;
  /** the host publishing the client's metadata document (a client whose id is that document's address), else null */
  clientHost: string | null;
  /** the host the browser returns to: where the access goes */
  redirectHost: string;
  scopes: string[];
  organization: string | null;
  /** why the client will not be able to read the vault though it asks to (no organization, or no vault:read there), else null */
  unreadable: "no-organization" | "no-permission" | null;
  /** the signed query, posted back to the plugin as it came */
  signedQuery: string;
}

export function ConsentPage(props: { viewer: Viewer; request: ConsentRequest }) {
  const { request } = props;
  return (
    <Layout title="Allow access to Core?" viewer={props.viewer}>
      <div class="card">
        <p id="consent-client">
          <strong>{request.clientName}</strong> asks to use your Core account, <strong>{props.viewer.email}</strong>.
        </p>
        <dl class="facts">
          {request.clientHost && (
            <>
              <dt>Described by</dt>
              <dd id="consent-client-host">{request.clientHost}</dd>
            </>
          )}
          <dt>Returns to</dt>
          <dd id="consent-redirect-host">{request.redirectHost}</dd>
          <dt>Acts in</dt>
          <dd id="consent-organization">{request.organization ?? "no organization (you are not a member of any)"}</dd>
        </dl>
        {request.unreadable && (
          <Alert kind="error" id="consent-unreadable">
            {request.unreadable === "no-organization"
              ? "This app will not be able to read the vault: you are not a member of any organization, and the vault is read on behalf of one. Join or set up an organization first, then connect the app again."
              : `This app will not be able to read the vault: your role in ${request.organization} does not include reading it (vault:read). Ask an owner of ${request.organization} for it, or switch to another organization on your account page first.`}
          </Alert>
        )}
        <p>It will be able to:</p>
        <ul id="consent-scopes">
          {request.scopes.map((scope) => (
            <li>{SCOPE_WORDS[scope] ?? scope}</li>
          ))}
        </ul>
        <p>
          Allow only if you started this from an app you trust. Its access ends when this browser's session ends: when you sign out here, revoke this session on your account page, or change your password or
          turn on two-factor authentication and sign your other sessions out (both do so unless you untick it).
        </p>
        <form method="post" action={CONSENT_PAGE} class="actions">
          <CsrfField token={props.viewer.csrf} />
          <input type="hidden" name="oauth_query" value={request.signedQuery} />
          <button type="submit" name="decision" value="allow">
            Allow
          </button>
          <button type="submit" name="decision" value="deny" class="secondary">
            Deny
          </button>
        </form>
      </div>
    </Layout>
  );
}

/** The host of an address (a redirect URI, a client id), as the person should read it. */
function hostOf(address: string | null): string {
  try {
    return address ? new URL(address).host : "unknown";
  } catch {
    return "unknown";
  }
}

/** The origin a redirect URI returns to, for the page's form-action (the browser follows our 303 there). */
function originOf(redirectUri: string | null): string | null {
  try {
    return redirectUri ? new URL(redirectUri).origin : null;
  } catch {
    return null;
  }
}

/**
 * The consent page of the OAuth provider (ADR 0028): the plugin sends a signed-in browser here with
 * its signed authorization request; the page names the client, where it returns, the organization
 * the access acts in and the scopes in words. Allow or Deny post back here (CSRF-bound to the
 * session), and we call the plugin's consent route as the person, which checks the signature and
 * answers where the browser goes: the client with a code, or with `error=access_denied`.
 */
export function oauthConsentPages(app: ServiceApp, ctx: IamContext) {
  app.get(
    CONSENT_PAGE,
    page(ctx, async (c) => {
      const signedQuery = new URL(c.req.url).search.slice(1);
      const session = await pageSession(c, ctx);
      if (!session) return c.redirect(signInAddress(`${CONSENT_PAGE}?${signedQuery}`), 302);
      const query = new URLSearchParams(signedQuery);
      const clientId = query.get("client_id");
      if (signedQuery.length > MAX_QUERY || !clientId || !query.get("sig")) {
        return render(c, <MessagePage title="No request to answer" viewer={session.viewer} kind="error" message="This page answers an app's request to use your account, and no such request came with it. Start again from the app." />, 400);
      }
      const [client] = await ctx.db.select({ name: oauthClient.name, discovery: oauthClient.clientDiscoveryId }).from(oauthClient).where(eq(oauthClient.clientId, clientId));
      const orgId = session.principal.orgId;
      const [org] = orgId ? await ctx.db.select({ name: organization.name }).from(organization).where(eq(organization.id, orgId)) : [];
      const redirectUri = query.get("redirect_uri");
      const request: ConsentRequest = {
        clientName: client?.name || clientId,
        // a name in a metadata document is its publisher's claim: the page names the publisher too
        clientHost: client?.discovery === CLIENT_METADATA_DISCOVERY ? hostOf(clientId) : null,
        redirectHost: hostOf(redirectUri),
        scopes: (query.get("scope") ?? "").split(" ").filter(Boolean),
        organization: org?.name ?? null,
        unreadable: !(query.get("scope") ?? "").split(" ").includes("vault:read") ? null : !orgId ? "no-organization" : session.principal.permissions.includes("vault:read") ? null : "no-permission",
        signedQuery,
      };
      const answer = await render(c, <ConsentPage viewer={session.viewer} request={request} />);
      // the Allow and Deny answers are redirects to the client: form-action must allow its origin (Chromium checks redirects too)
      const origin = originOf(redirectUri);
      const policy = answer.headers.get("content-security-policy");
      if (origin && policy) answer.headers.set("content-security-policy", policy.replace("form-action 'self'", `form-action 'self' ${origin}`));
      return answer;
    }),
  );

  app.post(
    CONSENT_PAGE,
    page(ctx, async (c) => {
      const { form, viewer } = await sessionForm(c, ctx);
      const decision = form.decision;
      const signedQuery = form.oauth_query ?? "";
      if ((decision !== "allow" && decision !== "deny") || !signedQuery || signedQuery.length > MAX_QUERY) {
        return render(c, <MessagePage title="Choose Allow or Deny" viewer={viewer} kind="error" message="The form did not say whether to allow or deny, or lost the app's request. Start again from the app." />, 400);
      }
      const answer = await callAuthLibraryAs(c, ctx, "POST", "/oauth2/consent", { accept: decision === "allow", oauth_query: signedQuery });
      const to = answer.status >= 300 && answer.status < 400 ? answer.headers.get("location") : answer.ok ? ((await answer.json()) as { url?: string }).url : null;
      if (!to) {
        return render(c, <MessagePage title="The request has expired" viewer={viewer} kind="error" message="This request is no longer valid: it expired or was already answered. Start again from the app." />, 400);
      }
      c.header("cache-control", "no-store");
      return c.redirect(to, 303);
    }),
  );
}
