import type { Child } from "hono/jsx";
import { CSRF_FIELD } from "./csrf.js";

/** Who is looking at a page: shown in the header, with the sign-out button. */
export interface Viewer {
  email: string;
  /** the CSRF token of this viewer's forms */
  csrf: string;
  /** something the viewer must be told once, on whatever page comes next */
  notice?: string | null;
}

export const STYLESHEET_PATH = "/assets/pages.css";

/** Every page: one `h1`, the content in `main`, the signed-in user and sign-out in the header. */
export function Layout(props: { title: string; viewer?: Viewer | null; children?: Child }) {
  return (
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>{`${props.title} · Core`}</title>
        <link rel="stylesheet" href={STYLESHEET_PATH} />
      </head>
      <body>
        <a class="skip" href="#main">
          Skip to content
        </a>
        <header class="top">
          <a class="brand" href="/account">
            Core
          </a>
          {props.viewer ? (
            <nav aria-label="Account">
              <span class="who">{props.viewer.email}</span>
              <form method="post" action="/sign-out">
                <CsrfField token={props.viewer.csrf} />
                <button type="submit">Sign out</button>
              </form>
            </nav>
          ) : null}
        </header>
        <main id="main">
          <h1>{props.title}</h1>
          {props.viewer?.notice ? (
            <Alert kind="info" id="notice">
              {props.viewer.notice}
            </Alert>
          ) : null}
          {props.children}
        </main>
      </body>
    </html>
  );
}

export const CsrfField = (props: { token: string }) => <input type="hidden" name={CSRF_FIELD} value={props.token} />;

/** A message above a form or on a result page; errors are announced (`role="alert"`). */
export function Alert(props: { kind: "error" | "success" | "info"; id?: string; children?: Child }) {
  return (
    <div class={`alert ${props.kind}`} id={props.id} role={props.kind === "error" ? "alert" : "status"}>
      {props.children}
    </div>
  );
}

/** A labelled input with an optional hint and error, both tied to it for screen readers. */
export function Field(props: {
  name: string;
  /** defaults to `field-<name>`; give one when a page has two fields of one name */
  id?: string;
  label: string;
  type?: "text" | "email" | "password";
  value?: string;
  autocomplete?: string;
  hint?: string;
  error?: string | null;
  /** the id of a form-wide error this field is part of */
  describedBy?: string | null;
  required?: boolean;
  autofocus?: boolean;
  minlength?: number;
  maxlength?: number;
  pattern?: string;
  extra?: Record<string, string | boolean>;
}) {
  const id = props.id ?? `field-${props.name}`;
  const describedBy = [props.hint ? `${id}-hint` : null, props.error ? `${id}-error` : null, props.describedBy ?? null].filter(Boolean).join(" ");
  return (
    <div class="field">
      <label for={id}>{props.label}</label>
      <input
        id={id}
        name={props.name}
        type={props.type ?? "text"}
        value={props.value}
        autocomplete={props.autocomplete}
        required={props.required ?? true}
        autofocus={props.autofocus}
        minlength={props.minlength}
        maxlength={props.maxlength}
        pattern={props.pattern}
        aria-invalid={props.error || props.describedBy ? "true" : undefined}
        aria-describedby={describedBy || undefined}
        {...props.extra}
      />
      {props.hint ? (
        <span class="hint" id={`${id}-hint`}>
          {props.hint}
        </span>
      ) : null}
      {props.error ? (
        <p class="field-error" id={`${id}-error`}>
          {props.error}
        </p>
      ) : null}
    </div>
  );
}

/** A page that only says what happened, with where to go next. */
export function MessagePage(props: { title: string; viewer?: Viewer | null; kind?: "error" | "success" | "info"; message: Child; next?: { href: string; label: string } }) {
  return (
    <Layout title={props.title} viewer={props.viewer}>
      <div class="card">
        <Alert kind={props.kind ?? "info"}>{props.message}</Alert>
        {props.next ? (
          <p>
            <a href={props.next.href}>{props.next.label}</a>
          </p>
        ) : null}
      </div>
    </Layout>
  );
}
