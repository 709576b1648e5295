import { request as httpRequest, type IncomingMessage, type RequestOptions } from "node:http";

/** IAM did not answer at all: refused, unknown host, reset or silent past the timeout. */
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

const TIMEOUT_MS = 15_000;
const MAX_BODY_BYTES = 1 << 20;

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
export async function postForm(url: string, form: Record<string, string> | null, options: { bearer?: string; userAgent: string }): Promise<Answer> {
  const target = new URL(url);
  const body = form ? new URLSearchParams(form).toString() : "";
  const headers: Record<string, string> = {
    accept: "application/json",
    "user-agent": options.userAgent,
    "content-length": String(Buffer.byteLength(body)),
  };
  if (form) headers["content-type"] = "application/x-www-form-urlencoded";
  if (options.bearer) headers.authorization = `Bearer ${options.bearer}`;
  // https loads TLS, so only when asked for
  const request = target.protocol === "https:" ? (await import("node:https")).request : httpRequest;
  const requestOptions: RequestOptions = { method: "POST", headers, agent: false, timeout: TIMEOUT_MS };

  return new Promise<Answer>((resolve, reject) => {
    const outgoing = request(target, requestOptions, (response: IncomingMessage) => {
      const chunks: Buffer[] = [];
      let size = 0;
      response.on("data", (chunk: Buffer) => {
        size += chunk.length;
        if (size <= MAX_BODY_BYTES) chunks.push(chunk);
      });
      response.on("error", (err) => reject(new Unreachable(reasonOf(err))));
      response.on("end", () => resolve({ status: response.statusCode ?? 0, body: parseJson(Buffer.concat(chunks).toString("utf8")) }));
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
