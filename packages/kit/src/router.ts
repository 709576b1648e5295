import type { Handler, MiddlewareHandler } from "hono";
import type { Result, Router } from "hono/router";
import { RegExpRouter } from "hono/router/reg-exp-router";
import { SmartRouter } from "hono/router/smart-router";
import { TrieRouter } from "hono/router/trie-router";
import type { RouterRoute } from "hono/types";

type Entry = [Handler | MiddlewareHandler, RouterRoute];
type Matched = Result<Entry>[0];

/**
 * Hono's own router (the one it picks by default), with the kit's work put in front of whatever a
 * request matches. A route with one handler gets that handler wrapped in the kit's work, so hono
 * runs it directly; any other match (validators before the route, or no route) gets the kit's
 * middleware first and goes through hono's compose as usual (ADR 0005).
 */
export class KitRouter implements Router<Entry> {
  name = "kit";
  readonly #inner = new SmartRouter<Entry>({ routers: [new RegExpRouter(), new TrieRouter()] });
  // a match's handler list is kept by hono's router for each route, so each is wrapped once
  readonly #served = new WeakMap<Matched, Matched>();
  readonly #unmatched: Matched;

  /** `middleware` runs before a chain (or alone, when nothing matched), `wrap` around a lone handler. */
  constructor(
    private readonly middleware: MiddlewareHandler,
    private readonly wrap: (handler: Handler) => Handler,
  ) {
    this.#unmatched = [[[middleware, kitRoute(middleware)], {}]] as Matched;
  }

  add(method: string, path: string, entry: Entry): void {
    this.#inner.add(method, path, entry);
  }

  match(method: string, path: string): Result<Entry> {
    const result = this.#inner.match(method, path);
    const matched = result[0];
    let served = matched.length === 0 ? this.#unmatched : this.#served.get(matched);
    if (!served) {
      served = this.#serve(matched);
      this.#served.set(matched, served);
    }
    return (result.length === 2 ? [served, result[1]] : [served]) as Result<Entry>;
  }

  #serve(matched: Matched): Matched {
    if (matched.length === 1) {
      const [[handler, route], params] = matched[0]!;
      return [[[this.wrap(handler as Handler), route], params]] as Matched;
    }
    return [[[this.middleware, kitRoute(this.middleware)], {}], ...matched] as Matched;
  }
}

/** the entries the kit puts in front of a match, told apart from a service's own `/*` middleware */
const kitRoutes = new WeakSet<RouterRoute>();
const kitRoute = (handler: MiddlewareHandler): RouterRoute => {
  const route = { basePath: "/", path: "/*", method: "ALL", handler };
  kitRoutes.add(route);
  return route;
};

/** Whether a matched route is the kit's own entry rather than a service's route. */
export const isKitRoute = (route: RouterRoute): boolean => kitRoutes.has(route);
