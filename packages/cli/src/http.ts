import { request as httpRequest, type IncomingMessage, type RequestOptions } from "node:http";

/** The server did not answer at all: refused, unknown host, reset or silent past the timeout. */
export class Unreachable extends Error {
  constructor(readonly reason: string) {
    super(reason);
    this.name = "Unreachable";
  }
}

export interface Answer {
  status: number;
  /** the parsed JSON body, or null when the body is not JSON */
  body: any;
}

/**
 * IAM's API keys start with this (its API key plugin's prefix): a CI job logs in with one, and it
 * travels as `x-api-key` (DESIGN §4). Session tokens never contain `_`, so the two cannot be confused.
 */
export const API_KEY_PREFIX = "core_";
export const isApiKey = (token: string) => token.startsWith(API_KEY_PREFIX);

const TIMEOUT_MS = 15_000;
// a version list carries every definition, so answers may be large; beyond this the body is cut off
const MAX_BODY_BYTES = 32 << 20;

const REASONS: Record<string, string> = {
  ECONNREFUSED: "connection refused",
  ENOTFOUND: "host not found",
  EAI_AGAIN: "host not found",
  ECONNRESET: "connection reset",
  EHOSTUNREACH: "host unreachable",
  ENETUNREACH: "network unreachable",
  ETIMEDOUT: "timed out",
};

/**
 * POSTs a form (OAuth endpoints read forms, RFC 6749 §4.1.3) and reads a JSON answer. node:http
 * rather than fetch: fetch loads undici on first use, about 25 ms of the CLI's start (bench/cli-startup.mjs).
 */
export function postForm(url: string, form: Record<string, string> | null, options: { credential?: string; userAgent: string }): Promise<Answer> {
  const body = form ? new URLSearchParams(form).toString() : "";
  return send("POST", url, body, form ? "application/x-www-form-urlencoded" : null, options).then(({ status, raw }) => ({ status, body: parseJson(raw.toString("utf8")) }));
}

/** One request with an optional JSON body (the stack registry's and billing's routes, spec §4.4, §4.5), JSON answer. */
export function requestJson(method: string, url: string, json: unknown, options: { credential?: string; userAgent: string; headers?: Record<string, string> }): Promise<Answer> {
  const body = json === undefined ? "" : JSON.stringify(json);
  return send(method, url, body, json === undefined ? null : "application/json", options).then(({ status, raw }) => ({ status, body: parseJson(raw.toString("utf8")) }));
}

/** The error envelope (spec §2.3), or what stands in for it when the body is not one. */
export interface Refusal {
  status: number;
  code: string;
  message: string;
  requestId: string | null;
  details: unknown;
}

export type Reply<T> = { ok: T } | { refused: Refusal };

/**
 * One call to a service's JSON API (the stack registry, billing): the answer when it has the
 * `expected` status, else what its error envelope says. One `CORE_DEBUG` line. Throws `Unreachable`.
 */
export async function callService<T>(
  method: string,
  url: string,
  body: unknown,
  expected: number,
  options: { credential?: string; userAgent: string; debug: (line: string) => void; headers?: Record<string, string> },
): Promise<Reply<T>> {
  let answer: Answer;
  try {
    answer = await requestJson(method, url, body, options);
  } catch (err) {
    if (err instanceof Unreachable) options.debug(`${method} ${url} → unreachable: ${err.reason}`);
    throw err;
  }
  const envelope = answer.body?.error;
  options.debug(`${method} ${url} → ${answer.status}${typeof envelope?.code === "string" ? ` ${envelope.code}` : ""}`);
  if (answer.status === expected && answer.body !== null && typeof answer.body === "object") return { ok: answer.body as T };
  return { refused: refusalOf(answer) };
}

/** What an error envelope (spec §2.3) says, or what stands in for it when the body is not one. */
function refusalOf(answer: Answer): Refusal {
  const envelope = answer.body?.error;
  return {
    status: answer.status,
    code: typeof envelope?.code === "string" ? envelope.code : `HTTP_${answer.status}`,
    message: typeof envelope?.message === "string" ? envelope.message : answer.body === null ? "the answer is not JSON" : "",
    requestId: typeof envelope?.requestId === "string" ? envelope.requestId : null,
    details: envelope?.details ?? null,
  };
}

/** A file a service sends (an invoice's PDF): its bytes and content type, or the refusal. */
/** A file billing answers (not JSON): its bytes, or billing's refusal. */
export type Download = Reply<{ contentType: string; bytes: Buffer; truncated: boolean }>;

/**
 * GET of a file (not JSON): the bytes when the answer is 200, else the error envelope's refusal.
 * `accept` names what is wanted; the caller checks the content type it got. Throws `Unreachable`.
 */
export async function download(url: string, accept: string, options: { credential?: string; userAgent: string; debug: (line: string) => void }): Promise<Download> {
  let answer: Awaited<ReturnType<typeof send>>;
  try {
    answer = await send("GET", url, "", null, { ...options, accept });
  } catch (err) {
    if (err instanceof Unreachable) options.debug(`GET ${url} → unreachable: ${err.reason}`);
    throw err;
  }
  options.debug(`GET ${url} → ${answer.status} ${answer.contentType}`);
  if (answer.status === 200) return { ok: { contentType: answer.contentType, bytes: answer.raw, truncated: answer.truncated } };
  return { refused: refusalOf({ status: answer.status, body: parseJson(answer.raw.toString("utf8")) }) };
}

async function send(
  method: string,
  url: string,
  body: string,
  contentType: string | null,
  options: { credential?: string; userAgent: string; headers?: Record<string, string>; accept?: string },
): Promise<{ status: number; raw: Buffer; contentType: string; truncated: boolean }> {
  const target = new URL(url);
  const headers: Record<string, string> = {
    ...options.headers,
    accept: options.accept ?? "application/json",
    "user-agent": options.userAgent,
    "content-length": String(Buffer.byteLength(body)),
  };
  if (contentType) headers["content-type"] = contentType;
  if (options.credential) {
    if (isApiKey(options.credential)) headers["x-api-key"] = options.credential;
    else headers.authorization = `Bearer ${options.credential}`;
  }
  // https loads TLS, so only when asked for
  const request = target.protocol === "https:" ? (await import("node:https")).request : httpRequest;
  const requestOptions: RequestOptions = { method, headers, agent: false, timeout: TIMEOUT_MS };

  return new Promise((resolve, reject) => {
    const outgoing = request(target, requestOptions, (response: IncomingMessage) => {
      const chunks: Buffer[] = [];
      let size = 0;
      response.on("data", (chunk: Buffer) => {
        size += chunk.length;
        if (size <= MAX_BODY_BYTES) chunks.push(chunk);
      });
      response.on("error", (err) => reject(new Unreachable(reasonOf(err))));
      response.on("end", () =>
        resolve({ status: response.statusCode ?? 0, raw: Buffer.concat(chunks), contentType: String(response.headers["content-type"] ?? ""), truncated: size > MAX_BODY_BYTES }),
      );
    });
    outgoing.on("timeout", () => outgoing.destroy(Object.assign(new Error("timeout"), { code: "ETIMEDOUT" })));
    outgoing.on("error", (err) => reject(new Unreachable(reasonOf(err))));
    outgoing.end(body);
  });
}

function reasonOf(err: NodeJS.ErrnoException): string {
  return (err.code && REASONS[err.code]) ?? err.code ?? err.message;
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}
