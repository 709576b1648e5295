import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { exportJWK, generateKeyPair, importJWK, jwtVerify, SignJWT, type CryptoKey, type JWK } from "jose";
import type { Principal } from "../../src/principal.js";

/**
 * A small real HTTP server playing IAM's side of the service-to-service contracts (DESIGN §4):
 * `POST /api/core/service-token` (Basic auth), `POST /api/validate-session` and
 * `POST /api/core/apikey/validate` (service token with `aud` = `iam`), `GET /api/auth/jwks`.
 * Written apart from the code under test, so the tests check both sides of the contract.
 */
export interface FakeIam {
  /** base URL, also the `iss` of its service tokens */
  url: string;
  /** session token → principal; anything else is `{ valid: false }` */
  sessions: Map<string, Principal>;
  /** raw API key → principal */
  apiKeys: Map<string, Principal>;
  /** service id → secret, for `/api/core/service-token` */
  serviceSecrets: Map<string, string>;
  /** requests per route, e.g. `calls["POST /api/validate-session"]` */
  calls: Record<string, number>;
  /** the request bodies and Authorization headers IAM received, in order */
  received: { route: string; authorization: string | undefined; requestId: string | undefined; traceparent: string | undefined; body: unknown }[];
  /** lifetime of the service tokens it issues, in seconds (default 300) */
  tokenLifetime: number;
  /** when set, every route answers with this status and an error body */
  failWith: number | undefined;
  /** the Retry-After such a failure carries, if any (a 429 carries 17 unless told) */
  failRetryAfter: string | undefined;
  /** when set, the validate routes answer 200 with this body instead of the contract's */
  validateAnswer: unknown;
  /** signs a service token as IAM would, with any claim or header overridden (null removes it) */
  mintServiceToken(claims?: MintOptions): Promise<string>;
  /** publishes a new signing key beside the old one (key rotation); new tokens use it */
  rotateKey(): Promise<void>;
  close(): Promise<void>;
}

export interface MintOptions {
  sub?: string;
  aud?: string | null;
  iss?: string | null;
  typ?: string | null;
  /** seconds */
  iat?: number | null;
  exp?: number | null;
  /** sign with a key IAM does not publish */
  foreignKey?: boolean;
  /** sign with the previous key after a rotation */
  previousKey?: boolean;
  /** the header's `typ` (default `JWT`): `at+jwt` makes an OAuth access token's shape (RFC 9068) */
  headerTyp?: string;
  /** further claims (an access token's `scope`, `permissions`) */
  extra?: Record<string, unknown>;
}

interface SigningKey {
  kid: string;
  privateKey: CryptoKey;
  publicJwk: JWK;
}

async function newSigningKey(kid: string): Promise<SigningKey> {
  const { publicKey, privateKey } = await generateKeyPair("EdDSA", { crv: "Ed25519", extractable: true });
  return { kid, privateKey, publicJwk: { ...(await exportJWK(publicKey)), kid, alg: "EdDSA", use: "sig" } };
}

/** A principal as IAM's validate routes answer it, with sensible defaults for a tenant member. */
export function principal(overrides: Partial<Principal> = {}): Principal {
  return {
    type: "user",
    userId: "usr_member",
    email: "member@example.com",
    sessionId: "ses_member",
    apiKeyId: null,
    expiresAt: "2099-01-01T00:00:00.000Z",
    orgId: "org_tenant",
    orgType: "tenant",
    platformId: "plt_tenant",
    platformStatus: "active",
    role: "member",
    permissions: ["platform:read"],
    ...overrides,
  };
}

const nowSeconds = () => Math.floor(Date.now() / 1000);

export async function startFakeIam(): Promise<FakeIam> {
  let keys: SigningKey[] = [await newSigningKey("key-1")];
  const foreign = await newSigningKey("key-1"); // same kid, different key: a forgery

  const state = {
    url: "",
    sessions: new Map<string, Principal>(),
    apiKeys: new Map<string, Principal>(),
    serviceSecrets: new Map<string, string>(),
    calls: {} as Record<string, number>,
    received: [] as FakeIam["received"],
    tokenLifetime: 300,
    failWith: undefined as number | undefined,
    failRetryAfter: undefined as string | undefined,
    validateAnswer: undefined as unknown,
  };

  async function mintServiceToken(options: MintOptions = {}): Promise<string> {
    const key = options.foreignKey ? foreign : options.previousKey ? keys[0]! : keys[keys.length - 1]!;
    const iat = options.iat === undefined ? nowSeconds() : options.iat;
    const claims: Record<string, unknown> = {
      iss: options.iss === undefined ? state.url : options.iss,
      sub: options.sub ?? "billing",
      aud: options.aud === undefined ? "platform-registry" : options.aud,
      typ: options.typ === undefined ? "service" : options.typ,
      iat,
      exp: options.exp === undefined ? (iat ?? nowSeconds()) + state.tokenLifetime : options.exp,
    };
    Object.assign(claims, options.extra);
    for (const [name, value] of Object.entries(claims)) if (value === null) delete claims[name];
    return new SignJWT(claims).setProtectedHeader({ alg: "EdDSA", kid: key.kid, typ: options.headerTyp ?? "JWT" }).sign(key.privateKey);
  }

  /** IAM accepts only its own service tokens addressed to it */
  async function isServiceCaller(authorization: string | undefined): Promise<boolean> {
    const token = /^Bearer (\S+)$/.exec(authorization ?? "")?.[1];
    if (!token) return false;
    for (const key of keys) {
      try {
        const { payload } = await jwtVerify(token, await importJWK(key.publicJwk, "EdDSA"), { issuer: state.url, audience: "iam" });
        if (payload.typ === "service") return true;
      } catch {
        // try the next key
      }
    }
    return false;
  }

  async function route(req: IncomingMessage, res: ServerResponse, body: unknown) {
    const path = new URL(req.url ?? "/", state.url).pathname;
    const name = `${req.method} ${path}`;
    state.calls[name] = (state.calls[name] ?? 0) + 1;
    const requestId = req.headers["x-request-id"];
    state.received.push({ route: name, authorization: req.headers.authorization, requestId: typeof requestId === "string" ? requestId : undefined, traceparent: typeof req.headers.traceparent === "string" ? req.headers.traceparent : undefined, body });
    const send = (status: number, answer: unknown) => {
      // IAM's rate limits say when to come back, and so may an outage
      const retryAfter = state.failWith ? (state.failRetryAfter ?? (status === 429 ? "17" : undefined)) : undefined;
      res.writeHead(status, { "content-type": "application/json", ...(retryAfter ? { "retry-after": retryAfter } : {}) });
      res.end(JSON.stringify(answer));
    };
    if (state.failWith) return send(state.failWith, { error: { code: "INTERNAL", message: "IAM is failing", requestId: "fake", details: null } });

    if (name === "GET /api/auth/jwks") return send(200, { keys: keys.map((k) => k.publicJwk) });

    if (name === "POST /api/core/service-token") {
      const basic = /^Basic (\S+)$/.exec(req.headers.authorization ?? "")?.[1];
      const [id, secret] = basic ? Buffer.from(basic, "base64").toString().split(":") : [];
      if (!id || state.serviceSecrets.get(id) !== secret) return send(401, { error: { code: "UNAUTHENTICATED", message: "bad service credential", requestId: "fake", details: null } });
      const { serviceId, targetService } = body as { serviceId?: string; targetService?: string };
      if (serviceId !== id) return send(403, { error: { code: "FORBIDDEN", message: "serviceId is not the caller", requestId: "fake", details: null } });
      const token = await mintServiceToken({ sub: id, aud: targetService ?? null });
      return send(200, { token, tokenType: "Bearer", expiresIn: state.tokenLifetime });
    }

    if (name === "POST /api/validate-session" || name === "POST /api/core/apikey/validate") {
      if (!(await isServiceCaller(req.headers.authorization))) {
        return send(401, { error: { code: "UNAUTHENTICATED", message: "service token required", requestId: "fake", details: null } });
      }
      if (state.validateAnswer !== undefined) return send(200, state.validateAnswer);
      const found =
        name === "POST /api/validate-session"
          ? state.sessions.get((body as { token?: string }).token ?? "")
          : state.apiKeys.get((body as { key?: string }).key ?? "");
      return send(200, found ? { valid: true, principal: found } : { valid: false });
    }

    send(404, { error: { code: "NOT_FOUND", message: `No route for ${name}`, requestId: "fake", details: null } });
  }

  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const text = Buffer.concat(chunks).toString();
      let body: unknown = null;
      try {
        body = text ? JSON.parse(text) : null;
      } catch {
        body = text;
      }
      route(req, res, body).catch((err: Error) => {
        res.writeHead(500);
        res.end(err.message);
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  return Object.assign(state, {
    mintServiceToken,
    rotateKey: async () => {
      keys = [...keys, await newSigningKey(`key-${keys.length + 1}`)];
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  });
}

/** A URL where nothing listens: IAM down. */
export async function deadUrl(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}`;
}
