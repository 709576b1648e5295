import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { createServer as createTlsServer } from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Provider from "oidc-provider";
import { Agent, fetch as undiciFetch } from "undici";

/** A person the identity provider knows: `login` is what they type on its sign-in page. */
export interface IdpAccount {
  email: string;
  emailVerified: boolean;
  name: string;
}

/** A certificate for `hostname` (and 127.0.0.1), self-signed with the openssl command: the provider's and its own authority. */
export function certificateFor(hostname: string): { key: string; cert: string } {
  const dir = mkdtempSync(join(tmpdir(), "idp-tls-"));
  try {
    execFileSync("openssl", [
      "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1",
      "-subj", `/CN=${hostname}`, "-addext", `subjectAltName=DNS:${hostname},IP:127.0.0.1`,
      "-keyout", join(dir, "key.pem"), "-out", join(dir, "cert.pem"),
    ], { stdio: "ignore" });
    return { key: readFileSync(join(dir, "key.pem"), "utf8"), cert: readFileSync(join(dir, "cert.pem"), "utf8") };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * A real OpenID Connect provider (`oidc-provider`, ESM) in the test process, on 127.0.0.1 with a
 * random port: one confidential client whose redirect URI is IAM's SSO callback, accounts added by
 * the tests, and the library's own development sign-in and consent pages (any password works).
 * With `tls` it serves https under `hostname` (which only the tests' resolvers know: they answer
 * 127.0.0.1 for it); every request it receives is noted in `requests`.
 */
export async function startIdp(options: { clientId?: string; clientSecret?: string; redirectUris: string[]; tls?: { key: string; cert: string }; hostname?: string }) {
  const accounts = new Map<string, IdpAccount>();
  const requests: string[] = [];
  let handler: ((req: IncomingMessage, res: ServerResponse) => void) | null = null;
  const serve = (req: IncomingMessage, res: ServerResponse) => {
    requests.push(`${req.method} ${(req.url ?? "/").split("?")[0]}`);
    handler!(req, res);
  };
  const server: Server = options.tls ? createTlsServer(options.tls, serve) : createServer(serve);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  const origin = options.tls ? `https://${options.hostname ?? "127.0.0.1"}:${port}` : `http://127.0.0.1:${port}`;
  // the test's browser: it knows the provider's name and trusts its certificate
  const browser = options.tls
    ? new Agent({ connect: { ca: options.tls.cert, lookup: (_host: string, _options: object, callback: (err: null, address: { address: string; family: number }[]) => void) => callback(null, [{ address: "127.0.0.1", family: 4 }]) } as never })
    : undefined;
  const clientId = options.clientId ?? "core-iam";
  const clientSecret = options.clientSecret ?? "idp-client-secret-0123456789abcdef";
  const provider = new Provider(origin, {
    clients: [
      {
        client_id: clientId,
        client_secret: clientSecret,
        redirect_uris: options.redirectUris,
        grant_types: ["authorization_code"],
        response_types: ["code"],
        token_endpoint_auth_method: "client_secret_basic",
      },
    ],
    claims: { openid: ["sub"], email: ["email", "email_verified"], profile: ["name"] },
    cookies: { keys: ["oidc-idp-test-cookie-key-0123456789"] },
    features: { devInteractions: { enabled: true } },
    findAccount: async (_ctx: unknown, id: string) => {
      const account = accounts.get(id);
      if (!account) return undefined;
      return { accountId: id, claims: async () => ({ sub: id, email: account.email, email_verified: account.emailVerified, name: account.name }) };
    },
  });
  handler = provider.callback();
  // the development pages warn on every start; tests need not read that
  let open = true;
  return {
    issuer: origin,
    origin,
    port,
    requests,
    clientId,
    clientSecret,
    provider,
    /** Adds someone; `login` is their name on the provider's sign-in page and their `sub`. */
    addAccount: (login: string, account: IdpAccount) => void accounts.set(login, account),
    /**
     * Signs `login` in at the provider as a browser would (the sign-in form, then consent), from the
     * authorization address IAM sent the browser to; returns the address the provider sends back to.
     */
    async authorize(authorizationUrl: string, login: string): Promise<string> {
      const cookies = new Map<string, string>();
      let url = authorizationUrl;
      let init: RequestInit = { method: "GET" };
      for (let step = 0; step < 12; step++) {
        const headers: Record<string, string> = { ...(init.headers as Record<string, string> | undefined) };
        if (cookies.size > 0) headers.cookie = [...cookies].map(([k, v]) => `${k}=${v}`).join("; ");
        const response = browser
          ? await undiciFetch(url, { method: init.method, body: init.body as string | undefined, headers, redirect: "manual", dispatcher: browser })
          : await fetch(url, { ...init, headers, redirect: "manual" });
        for (const c of response.headers.getSetCookie()) {
          const [pair] = c.split(";");
          const at = pair!.indexOf("=");
          cookies.set(pair!.slice(0, at), pair!.slice(at + 1));
        }
        const location = response.headers.get("location");
        if (location) {
          const next = new URL(location, url).href;
          if (!next.startsWith(origin)) return next;
          url = next;
          init = { method: "GET" };
          continue;
        }
        const html = await response.text();
        const action = /<form[^>]*action="([^"]+)"[^>]*method="post"/.exec(html)?.[1];
        if (!action) throw new Error(`the identity provider answered ${response.status} without a form: ${html.slice(0, 500)}`);
        const prompt = /name="prompt" value="(\w+)"/.exec(html)?.[1] ?? "consent";
        const fields: Record<string, string> = prompt === "login" ? { prompt, login, password: "any" } : { prompt };
        url = new URL(action.replace(/&amp;/g, "&"), url).href;
        init = { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: new URLSearchParams(fields).toString() };
      }
      throw new Error("the identity provider never sent the browser back");
    },
    async close() {
      if (!open) return;
      open = false;
      await browser?.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

export type Idp = Awaited<ReturnType<typeof startIdp>>;
