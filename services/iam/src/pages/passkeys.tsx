import { getAuthenticatorName } from "@better-auth/passkey";
import type { Context } from "hono";
import type { ServiceApp } from "@core/kit";
import type { Principal } from "@core/service-auth";
import type { IamContext } from "../app.js";
import { callAuthLibraryAs } from "../auth-library.js";
import { Alert, CsrfField, type Viewer } from "./layout.js";
import { libraryRefusal, page, sessionForm } from "./page.js";
import { PASSKEY_SCRIPT } from "./passkeys-script.js";

export const PASSKEY_SCRIPT_PATH = "/assets/passkeys.js";

/** A passkey as the plugin lists it; its public key and credential id are not shown. */
export interface PasskeyItem {
  id: string;
  name: string | null;
  deviceType: string;
  backedUp: boolean;
  createdAt: string | null;
  aaguid: string | null;
}

/** The account page's notices about passkeys (`?created=passkey` and so on). */
export const PASSKEY_NOTICES: Record<string, string> = {
  "created:passkey": "Your passkey is added: you can sign in with it from the sign-in page.",
  "saved:passkey": "The passkey is renamed.",
  "revoked:passkey": "The passkey is removed: it no longer signs you in.",
};

const NAME_MAX = 100;
const day = (iso: string | Date) => new Date(iso).toISOString().slice(0, 10);

/** What kind of authenticator holds it: the plugin's best guess by model, else how it is kept. */
const kindOf = (p: PasskeyItem) => getAuthenticatorName(p.aaguid ?? undefined) ?? null;
const deviceTypeOf = (p: PasskeyItem) => (p.deviceType === "multiDevice" ? "synced across devices" : "this device only");
const labelOf = (p: PasskeyItem) => p.name || kindOf(p) || "Unnamed passkey";

/** The script tag of our one script: an address on our origin, never inline. */
const PasskeyScript = () => <script src={PASSKEY_SCRIPT_PATH} defer></script>;

/** The "Passkeys" card of the account page: listed, renamed and removed with forms, added with the script. */
export function PasskeysSection(props: { passkeys: PasskeyItem[] | null; csrf: string; error?: string | null }) {
  const { passkeys } = props;
  return (
    <section class="card" aria-labelledby="passkeys-heading">
      <h2 id="passkeys-heading">Passkeys</h2>
      <p class="muted">A passkey signs you in with your device's screen lock or a security key, without a password. It works on this site's address only.</p>
      {props.error ? (
        <Alert kind="error" id="passkeys-error">
          {props.error}
        </Alert>
      ) : null}
      {passkeys === null ? (
        <p>Your passkeys could not be listed just now.</p>
      ) : passkeys.length === 0 ? (
        <p>You have no passkeys.</p>
      ) : (
        <ul class="items" id="passkey-list">
          {passkeys.map((p, i) => (
            <li>
              <div class="item-text">
                <strong>{labelOf(p)}</strong>
                <br />
                <span class="muted">
                  {p.createdAt ? `added ${day(p.createdAt)}` : "added"} · {deviceTypeOf(p)} · {p.backedUp ? "backed up" : "not backed up"}
                  {kindOf(p) && p.name ? ` · ${kindOf(p)}` : ""}
                </span>
                <form method="post" action="/account/passkeys/rename" class="rename">
                  <CsrfField token={props.csrf} />
                  <input type="hidden" name="id" value={p.id} />
                  <label for={`passkey-name-${i}`}>New name for {labelOf(p)}</label>
                  <input id={`passkey-name-${i}`} name="name" type="text" required maxlength={NAME_MAX} autocomplete="off" value={p.name ?? ""} />
                  <div class="actions">
                    <button type="submit" class="secondary small">
                      Rename
                    </button>
                  </div>
                </form>
              </div>
              <form method="post" action="/account/passkeys/remove">
                <CsrfField token={props.csrf} />
                <input type="hidden" name="id" value={p.id} />
                <button type="submit" class="danger small" aria-label={`Remove the passkey ${labelOf(p)}`}>
                  Remove
                </button>
              </form>
            </li>
          ))}
        </ul>
      )}
      <hr class="divider" />
      <h3>Add a passkey</h3>
      <noscript>
        <p id="passkey-needs-script">Adding a passkey needs JavaScript, which is off in this browser: the browser makes the passkey itself. Renaming and removing work without it.</p>
      </noscript>
      <p class="muted" data-passkey-unsupported hidden>
        This browser cannot make passkeys.
      </p>
      {/* shown by the script: without it the browser cannot make a passkey */}
      <form id="passkey-add" hidden>
        <div class="alert error" id="passkey-add-error" role="alert" tabindex={-1} hidden></div>
        <div class="field">
          <label for="field-passkey-name">Name for the new passkey</label>
          <input id="field-passkey-name" name="name" type="text" maxlength={NAME_MAX} autocomplete="off" aria-describedby="field-passkey-name-hint" />
          <span class="hint" id="field-passkey-name-hint">
            Where it lives, for example: work laptop
          </span>
        </div>
        <button type="submit">Add a passkey</button>
      </form>
      <PasskeyScript />
    </section>
  );
}

/** The sign-in page's "Sign in with a passkey" card; `next` goes back to the sign-in page, which sends the browser on. */
export function PasskeySignIn(props: { next: string | null }) {
  return (
    <section class="card" aria-labelledby="passkey-heading">
      <h2 id="passkey-heading">Or with a passkey</h2>
      <noscript>
        <p id="passkey-needs-script">Signing in with a passkey needs JavaScript, which is off in this browser. Use your password or an emailed link.</p>
      </noscript>
      <p class="muted" data-passkey-unsupported hidden>
        This browser cannot use passkeys. Use your password or an emailed link.
      </p>
      <form id="passkey-sign-in" hidden>
        <div class="alert error" id="passkey-sign-in-error" role="alert" tabindex={-1} hidden></div>
        {props.next ? <input type="hidden" name="next" value={props.next} /> : null}
        <button type="submit" class="secondary">
          Sign in with a passkey
        </button>
      </form>
      <PasskeyScript />
    </section>
  );
}

/** The viewer's passkeys, as the plugin lists them (newest first), or null when it could not. */
export async function passkeysOf(c: Context, ctx: IamContext): Promise<PasskeyItem[] | null> {
  const listed = await callAuthLibraryAs(c, ctx, "GET", "/passkey/list-user-passkeys");
  if (!listed.ok) return null;
  const passkeys = (await listed.json()) as PasskeyItem[];
  return passkeys.sort((a, b) => Date.parse(b.createdAt ?? "") - Date.parse(a.createdAt ?? ""));
}

type Show = (c: Context, principal: Principal, viewer: Viewer, messages: { passkeysError?: string | null }, status: 400 | 404 | 429) => Promise<Response>;

/** The script, served from our own origin like the stylesheet. */
export function passkeyAsset(app: ServiceApp) {
  app.get(PASSKEY_SCRIPT_PATH, (c) =>
    c.body(PASSKEY_SCRIPT, 200, { "content-type": "text/javascript; charset=utf-8", "cache-control": "public, max-age=3600", "x-content-type-options": "nosniff" }),
  );
}

/**
 * Renaming and removing a passkey from the account page, without script: forms with the session's
 * CSRF token post here, and we call the plugin's own routes as the browser (its ownership check:
 * a passkey of another user is refused, and the account page says "not one of yours").
 */
export function passkeyAccountRoutes(app: ServiceApp, ctx: IamContext, show: Show) {
  app.post(
    "/account/passkeys/rename",
    page(ctx, async (c) => {
      const { caller, form, viewer } = await sessionForm(c, ctx);
      const name = (form.name ?? "").trim();
      if (!name || name.length > NAME_MAX) return show(c, caller.principal, viewer, { passkeysError: `Give the passkey a name of 1 to ${NAME_MAX} characters.` }, 400);
      const answer = await callAuthLibraryAs(c, ctx, "POST", "/passkey/update-passkey", { id: form.id ?? "", name });
      if (answer.status === 429) return show(c, caller.principal, viewer, { passkeysError: await libraryRefusal(c, answer) }, 429);
      if (!answer.ok) return show(c, caller.principal, viewer, { passkeysError: "That passkey is not one of yours, or it is removed already." }, 404);
      return c.redirect("/account?saved=passkey#passkeys-heading", 303);
    }),
  );

  app.post(
    "/account/passkeys/remove",
    page(ctx, async (c) => {
      const { caller, form, viewer } = await sessionForm(c, ctx);
      const answer = await callAuthLibraryAs(c, ctx, "POST", "/passkey/delete-passkey", { id: form.id ?? "" });
      if (answer.status === 429) return show(c, caller.principal, viewer, { passkeysError: await libraryRefusal(c, answer) }, 429);
      if (!answer.ok) return show(c, caller.principal, viewer, { passkeysError: "That passkey is not one of yours, or it is removed already." }, 404);
      return c.redirect("/account?revoked=passkey#passkeys-heading", 303);
    }),
  );
}
