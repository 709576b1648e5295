import type { ServiceApp } from "@core/kit";
import type { IamContext } from "../app.js";
import { accountPages } from "./account.js";
import { devicePages } from "./device.js";
import { STYLESHEET_PATH } from "./layout.js";
import { invitationPages } from "./invitations.js";
import { onboardingPages } from "./onboarding.js";
import { passwordPages } from "./password.js";
import { passkeyAsset } from "./passkeys.js";
import { verifyEmailPages } from "./verify-email.js";
import { signInPages } from "./sign-in.js";
import { ssoPages } from "./sso.js";
import { twoFactorPages } from "./two-factor.js";
import { orgPolicyPages } from "./org-policy.js";
import { oauthConsentPages } from "./oauth-consent.js";
import { STYLESHEET } from "./stylesheet.js";

/** Paths of the pages, whose bodies are forms (app.ts leaves them out of the JSON-only check). */
export const isPagePath = (path: string) => /^\/(sign-in|sign-up|sign-out|device|onboarding|account|forgot-password|reset-password|verify-email|invitations|oauth\/consent)(\/|$)/.test(path);

/**
 * The browser pages IAM serves (issue 3): server-rendered HTML, no script but passkeys.js, CSRF tokens on every
 * form. HTML, not API: they stay out of the OpenAPI description (plain `app.get`/`app.post`).
 */
export function pageRoutes(app: ServiceApp, ctx: IamContext) {
  app.get(STYLESHEET_PATH, (c) => c.body(STYLESHEET, 200, { "content-type": "text/css; charset=utf-8", "cache-control": "public, max-age=3600" }));
  passkeyAsset(app);
  signInPages(app, ctx);
  devicePages(app, ctx);
  onboardingPages(app, ctx);
  accountPages(app, ctx);
  passwordPages(app, ctx);
  verifyEmailPages(app, ctx);
  invitationPages(app, ctx);
  ssoPages(app, ctx);
  twoFactorPages(app, ctx);
  orgPolicyPages(app, ctx);
  oauthConsentPages(app, ctx);
}
