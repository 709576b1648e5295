import type { Iam } from "./harness.js";

export interface PageAnswer {
  status: number;
  headers: Headers;
  html: string;
  /** the Location of a redirect */
  location: string | null;
}

const unescape = (text: string) => text.replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&");

/** The hidden fields of the first form posting to `action` (the CSRF token among them). */
export function hiddenFields(html: string, action: string): Record<string, string> {
  const form = html.match(new RegExp(`<form[^>]*action="${action.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")}"[^>]*>([\\s\\S]*?)</form>`));
  if (!form) throw new Error(`no form posting to ${action} in:\n${html}`);
  const fields: Record<string, string> = {};
  for (const input of form[1]!.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)"\/>/g)) fields[input[1]!] = unescape(input[2]!);
  return fields;
}

/** The visible text of a page: tags dropped, entities decoded, white space collapsed. */
export const textOf = (html: string) =>
  unescape(html.replace(/<head>[\s\S]*?<\/head>/, "").replace(/<[^>]+>/g, " "))
    .replace(/\s+/g, " ")
    .replace(/ ([.,:;!?])/g, "$1")
    .trim();

/**
 * A browser as the pages meet it, without JavaScript: a cookie jar, form posts with the page's
 * own origin, redirects returned rather than followed.
 */
export class PageBrowser {
  readonly cookies = new Map<string, string>();

  constructor(
    private readonly iam: Iam,
    /** a `name=value` cookie to start with (a signed-in session) */
    cookie?: string,
  ) {
    if (cookie) this.remember(cookie);
  }

  get cookieHeader(): string {
    return [...this.cookies].map(([name, value]) => `${name}=${value}`).join("; ");
  }

  /** Opens a page as a browser navigates to it (the fetch metadata a browser sends with a navigation). */
  get(path: string, headers: Record<string, string> = {}): Promise<PageAnswer> {
    return this.send(path, { method: "GET", headers: { "sec-fetch-mode": "navigate", "sec-fetch-dest": "document", ...headers } });
  }

  /** Posts `fields` as a form, from this site (Origin) unless `headers` say otherwise. */
  post(path: string, fields: Record<string, string>, headers: Record<string, string> = {}): Promise<PageAnswer> {
    return this.send(path, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", origin: this.iam.origin, ...headers },
      body: new URLSearchParams(fields).toString(),
    });
  }

  /** Opens the page with the form, then submits it with its hidden fields (CSRF token) and `fields`. */
  async submit(pagePath: string, action: string, fields: Record<string, string>): Promise<PageAnswer> {
    const shown = await this.get(pagePath);
    if (shown.status !== 200 && shown.status !== 404) throw new Error(`${pagePath} answered ${shown.status}: ${shown.html}`);
    return this.post(action, { ...hiddenFields(shown.html, action), ...fields });
  }

  private async send(path: string, init: { method: string; headers: Record<string, string>; body?: string }): Promise<PageAnswer> {
    const headers: Record<string, string> = { ...init.headers };
    if (this.cookies.size > 0 && headers.cookie === undefined) headers.cookie = this.cookieHeader;
    const response = await this.iam.app.request(path, { method: init.method, headers, body: init.body });
    for (const cookie of response.headers.getSetCookie()) this.remember(cookie);
    return { status: response.status, headers: response.headers, html: await response.text(), location: response.headers.get("location") };
  }

  private remember(setCookie: string) {
    const [pair, ...attributes] = setCookie.split(";");
    const eq = pair!.indexOf("=");
    const name = pair!.slice(0, eq).trim();
    const value = pair!.slice(eq + 1).trim();
    const expired = attributes.some((a) => /^\s*max-age=0\s*$/i.test(a) || (/^\s*expires=/i.test(a) && Date.parse(a.split("=")[1]!) < Date.now()));
    if (expired || value === "") this.cookies.delete(name);
    else this.cookies.set(name, value);
  }
}
