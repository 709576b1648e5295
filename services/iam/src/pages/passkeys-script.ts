/**
 * The one script of the pages (issue 28): passkeys need the browser's WebAuthn API, which no form
 * can reach. Served from IAM's own origin (/assets/passkeys.js; the pages' CSP allows script from
 * 'self' only, nothing inline). It asks the passkey plugin's routes for options, hands them to
 * `navigator.credentials`, posts the answer back to the plugin and then navigates; the server
 * decides everything else. The few base64url conversions WebAuthn's JSON needs are written out
 * here rather than serving @simplewebauthn/browser, whose ESM build is a tree of modules: one
 * small file, no module graph to serve or to keep in step with the package.
 */
export const PASSKEY_SCRIPT = `"use strict";
(() => {
  const supported = typeof window.PublicKeyCredential === "function" && !!navigator.credentials;

  const fromBase64url = (text) => {
    const base64 = text.replace(/-/g, "+").replace(/_/g, "/") + "===".slice((text.length + 3) % 4);
    return Uint8Array.from(atob(base64), (c) => c.charCodeAt(0)).buffer;
  };
  const toBase64url = (buffer) => {
    let text = "";
    for (const byte of new Uint8Array(buffer)) text += String.fromCharCode(byte);
    return btoa(text).replace(/\\+/g, "-").replace(/\\//g, "_").replace(/=+$/, "");
  };
  const credentialsOf = (list) => (list || []).map((c) => ({ ...c, id: fromBase64url(c.id) }));

  class Refusal extends Error {
    constructor(status, code) {
      super(code || String(status));
      this.status = status;
      this.code = code;
    }
  }

  /** A call of the passkey plugin's routes, with this browser's session cookie. */
  async function library(path, body) {
    const init = body === undefined ? { method: "GET" } : { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) };
    const answer = await fetch("/api/auth/passkey/" + path, { ...init, credentials: "same-origin", cache: "no-store" });
    const json = await answer.json().catch(() => null);
    if (!answer.ok) throw new Refusal(answer.status, json && (json.code || (json.error && json.error.code)));
    return json;
  }

  function say(element, text) {
    element.textContent = text;
    element.hidden = false;
    element.focus();
  }

  function reason(err, what) {
    if (err instanceof Refusal) {
      if (err.status === 429) return "Too many attempts. Wait a minute, then try again.";
      if (err.code === "SESSION_NOT_FRESH") return "For your safety, sign out and in again before adding a passkey.";
      if (err.code === "PASSKEY_NOT_FOUND") return "This passkey is not registered with Core. Sign in another way, then add it on your account page.";
      if (err.status === 401) return what === "add" ? "Your session has ended. Sign in again to add a passkey." : "Signing in with this passkey failed. Try again, or sign in another way.";
      if (err.status === 400 && err.code === "VALIDATION_ERROR") return "Give the passkey a name of at most 100 characters.";
      return what === "add" ? "The passkey could not be added. Try again." : "Signing in with this passkey failed. Try again, or sign in another way.";
    }
    if (err && err.name === "InvalidStateError") return "This authenticator already holds a passkey for your account.";
    if (err && err.name === "NotAllowedError") return "The passkey request was cancelled or timed out.";
    if (err && err.name === "SecurityError") return "Passkeys only work on this site's own address (over HTTPS, or on localhost).";
    return what === "add" ? "The passkey could not be added. Try again." : "Signing in with this passkey failed. Try again, or sign in another way.";
  }

  for (const unsupported of document.querySelectorAll("[data-passkey-unsupported]")) unsupported.hidden = supported;

  const add = document.getElementById("passkey-add");
  if (add && supported) {
    add.hidden = false;
    const error = document.getElementById("passkey-add-error");
    add.addEventListener("submit", async (event) => {
      event.preventDefault();
      const button = add.querySelector("button");
      button.disabled = true;
      try {
        const name = add.elements.name.value.trim();
        const options = await library("generate-register-options");
        const publicKey = {
          ...options,
          challenge: fromBase64url(options.challenge),
          user: { ...options.user, id: fromBase64url(options.user.id) },
          excludeCredentials: credentialsOf(options.excludeCredentials),
        };
        const credential = await navigator.credentials.create({ publicKey });
        const response = credential.response;
        await library("verify-registration", {
          name: name || undefined,
          response: {
            id: credential.id,
            rawId: toBase64url(credential.rawId),
            type: credential.type,
            authenticatorAttachment: credential.authenticatorAttachment || undefined,
            clientExtensionResults: credential.getClientExtensionResults(),
            response: {
              clientDataJSON: toBase64url(response.clientDataJSON),
              attestationObject: toBase64url(response.attestationObject),
              transports: typeof response.getTransports === "function" ? response.getTransports() : [],
            },
          },
        });
        location.assign("/account?created=passkey#passkeys-heading");
      } catch (err) {
        say(error, reason(err, "add"));
        button.disabled = false;
      }
    });
  }

  const signIn = document.getElementById("passkey-sign-in");
  if (signIn && supported) {
    signIn.hidden = false;
    const error = document.getElementById("passkey-sign-in-error");
    signIn.addEventListener("submit", async (event) => {
      event.preventDefault();
      const button = signIn.querySelector("button");
      button.disabled = true;
      try {
        const options = await library("generate-authenticate-options");
        const publicKey = { ...options, challenge: fromBase64url(options.challenge), allowCredentials: credentialsOf(options.allowCredentials) };
        const credential = await navigator.credentials.get({ publicKey });
        const response = credential.response;
        await library("verify-authentication", {
          response: {
            id: credential.id,
            rawId: toBase64url(credential.rawId),
            type: credential.type,
            authenticatorAttachment: credential.authenticatorAttachment || undefined,
            clientExtensionResults: credential.getClientExtensionResults(),
            response: {
              clientDataJSON: toBase64url(response.clientDataJSON),
              authenticatorData: toBase64url(response.authenticatorData),
              signature: toBase64url(response.signature),
              userHandle: response.userHandle ? toBase64url(response.userHandle) : undefined,
            },
          },
        });
        // signed in: the sign-in page sends a signed-in browser on to where it was going (checked there)
        const next = signIn.elements.next ? signIn.elements.next.value : "";
        location.assign(next ? "/sign-in?next=" + encodeURIComponent(next) : "/sign-in");
      } catch (err) {
        say(error, reason(err, "sign-in"));
        button.disabled = false;
      }
    });
  }
})();
`;
