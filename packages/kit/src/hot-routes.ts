import { isUtf8 } from "node:buffer";
import type { IncomingHttpHeaders, IncomingMessage, RequestListener } from "node:http";

/** Bodies up to this many bytes are read for a hot route; a larger one takes the full path. */
export const HOT_BODY_BYTES = 4096;

/**
 * A route whose commonest answer is given before the app (ADR 0005: `POST /api/validate-session`
 * from a known service). `answer` gets the request's headers and its JSON body as text, and returns
 * the body of a 200 JSON answer, or undefined to let the request take the full path (the kit's
 * screen, the service's guard, the route), which gives every other answer. It may only answer a
 * request the full path would answer with exactly that body.
 */
export interface HotRoute {
  method: "POST";
  path: string;
  /** may answer later (a database read): a rejection, like undefined, hands the request on */
  answer(headers: IncomingHttpHeaders, body: string): string | undefined | Promise<string | undefined>;
}

/** What a served app hands `listen()` for its hot routes. */
export interface HotRoutes {
  routes: ReadonlyMap<string, HotRoute>;
  /** the id of a request: the caller's `x-request-id` when it is sane, else a new one */
  requestIdFor(incoming: string | undefined): string;
  /** counts and logs an answered request, as the kit's middleware does for every other */
  record(method: string, route: string, path: string, status: number, requestId: string, started: number): void;
}

type WithRawBody = IncomingMessage & { rawBody?: Buffer };

/**
 * A Node request listener that answers hot routes when they can and hands everything else to `next`
 * (the Hono app). Only a POST to a hot route's exact path, with a JSON body of declared
 * length up to HOT_BODY_BYTES, is read here; when the route declines, the body already read goes on
 * as `rawBody`, which @hono/node-server reads instead of the stream.
 */
export function withHotRoutes(hot: HotRoutes, next: RequestListener): RequestListener {
  return (incoming, outgoing) => {
    const route = hot.routes.get(incoming.url ?? "");
    if (!route || incoming.method !== route.method || !readableHere(incoming.headers)) return next(incoming, outgoing);
    const started = performance.now();
    const chunks: Buffer[] = [];
    incoming.on("data", (chunk: Buffer) => chunks.push(chunk));
    incoming.once("end", () => {
      const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
      const send = (answer: string | undefined) => {
        if (answer === undefined) {
          (incoming as WithRawBody).rawBody = body;
          return next(incoming, outgoing);
        }
        const given = incoming.headers["x-request-id"];
        const id = hot.requestIdFor(typeof given === "string" ? given : undefined);
        outgoing.writeHead(200, { "x-request-id": id, "content-type": "application/json", "content-length": Buffer.byteLength(answer) });
        outgoing.end(answer);
        hot.record(route.method, route.path, route.path, 200, id, started);
      };
      const answer = answerOf(route, incoming.headers, body);
      if (typeof answer === "object") answer.then(send, () => send(undefined));
      else send(answer);
    });
  };
}

// a Host @hono/node-server takes as it is (it parses any other, and may refuse it with 400), or a
// loopback name with any port, which it parses and takes
const PLAIN_HOST = /^[a-z0-9._-]+(?::(?:[1-5]\d{3,4}|[6-9]\d{3}))?$/;
const LOOPBACK_HOST = /^(?:127\.0\.0\.1|localhost):(\d{1,5})$/;
const plainHost = (host: string) => PLAIN_HOST.test(host) || Number(LOOPBACK_HOST.exec(host)?.[1] ?? NaN) <= 65_535;

function readableHere(headers: IncomingHttpHeaders): boolean {
  if (headers["transfer-encoding"] !== undefined || !isJsonMediaType(headers["content-type"])) return false;
  if (!plainHost(headers.host ?? "")) return false;
  const length = Number(headers["content-length"]);
  return length > 0 && length <= HOT_BODY_BYTES;
}

/** The route's answer, or undefined when it declines, the body is not UTF-8, or the route fails. */
function answerOf(route: HotRoute, headers: IncomingHttpHeaders, body: Buffer): ReturnType<HotRoute["answer"]> {
  if (!isUtf8(body)) return undefined;
  try {
    return route.answer(headers, body.toString("utf8"));
  } catch {
    // the full path answers, with its envelope, whatever made the hot route fail (a rejection too)
    return undefined;
  }
}

const JSON_MEDIA = /^application\/([\w.-]+\+)?json$/i;

/** The media type of a Content-Type, without its parameters (`application/json; charset=utf-8` → `application/json`). */
export const mediaTypeOf = (contentType: string | undefined): string => (contentType ?? "").split(";")[0]!.trim();

/** Whether a Content-Type names JSON (`application/json`, `application/…+json`, any parameters). */
export function isJsonMediaType(contentType: string | undefined): boolean {
  return JSON_MEDIA.test(mediaTypeOf(contentType));
}
