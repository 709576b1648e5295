import { beforeAll, describe, expect, it } from "vitest";
import pg from "pg";
import { createServer, type Server } from "node:net";
import { createServiceApp, isUnreachable, silentLogger } from "@core/kit";

/** Errors as the drivers and Node make them, and as drizzle wraps them (the driver's error as `cause`). */
const withCode = (message: string, code: string) => Object.assign(new Error(message), { code });
const wrapped = (cause: unknown) => Object.assign(new Error("Failed query: select 1\nparams: secret@example.com"), { name: "DrizzleQueryError", cause });

describe("isUnreachable", () => {
  it("knows a database that is not there to answer by its SQLSTATE, wrapped or not", () => {
    for (const code of ["08006", "08001", "08003", "57P01", "57P02", "57P03", "53300"]) {
      expect(isUnreachable(withCode("gone", code)), code).toBe("database");
      expect(isUnreachable(wrapped(withCode("gone", code))), code).toBe("database");
    }
  });

  it("knows node-postgres's own words for a lost or refused connection", () => {
    for (const message of ["Connection terminated unexpectedly", "Connection terminated due to connection timeout", "timeout exceeded when trying to connect", "Client has encountered a connection error and is not queryable"]) {
      expect(isUnreachable(wrapped(new Error(message))), message).toBe("database");
    }
  });

  it("knows a refused or reset connection, alone or among a host's addresses", () => {
    expect(isUnreachable(withCode("connect ECONNREFUSED 127.0.0.1:5432", "ECONNREFUSED"))).toBe("network");
    expect(isUnreachable(new TypeError("fetch failed", { cause: withCode("reset", "ECONNRESET") }))).toBe("network");
    expect(isUnreachable(new AggregateError([withCode("a", "ECONNREFUSED"), withCode("b", "ECONNREFUSED")]))).toBe("network");
  });

  it("leaves every other failure alone: constraint violations, syntax errors, plain bugs", () => {
    for (const err of [withCode("duplicate key", "23505"), withCode("syntax", "42601"), withCode("serialization", "40001"), new TypeError("x is undefined"), "a string", null, undefined, { code: 8006 }]) {
      expect(isUnreachable(wrapped(err))).toBeNull();
    }
  });

  it("stops on a cycle of causes", () => {
    const a = new Error("a") as Error & { cause?: unknown };
    const b = new Error("b", { cause: a });
    a.cause = b;
    expect(isUnreachable(a)).toBeNull();
  });
});

describe("a route whose database is gone", () => {
  let silent: Server;
  let port: number;
  beforeAll(async () => {
    // a port where nothing listens: taken, then closed
    silent = createServer();
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    port = (silent.address() as { port: number }).port;
    await new Promise<void>((resolve) => silent.close(() => resolve()));
  });

  it("answers 503 UPSTREAM_UNAVAILABLE with Retry-After, leaking neither the query nor its parameters", async () => {
    const pool = new pg.Pool({ connectionString: `postgres://postgres@127.0.0.1:${port}/postgres`, connectionTimeoutMillis: 2_000 });
    pool.on("error", () => {});
    const app = createServiceApp({ service: "kit-test", title: "t", logger: silentLogger() });
    app.get("/read", async (c) => {
      try {
        await pool.query("select $1::text", ["secret@example.com"]);
      } catch (err) {
        throw wrapped(err);
      }
      return c.json({ ok: true });
    });
    app.get("/lost", () => {
      throw wrapped(withCode("terminating connection due to administrator command", "57P01"));
    });
    const started = Date.now();
    const read = await app.request("/read", { headers: { "x-request-id": "req-503" } });
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(read.status).toBe(503);
    expect(read.headers.get("retry-after")).toBe("5");
    const text = await read.text();
    expect(JSON.parse(text)).toEqual({
      error: { code: "UPSTREAM_UNAVAILABLE", message: "A service this request depends on is unreachable; try again shortly", requestId: "req-503", details: null },
    });
    expect(text).not.toContain("secret@example.com");
    const lost = await app.request("/lost");
    expect(lost.status).toBe(503);
    expect(((await lost.json()) as { error: { message: string } }).error.message).toBe("The database is unavailable; try again shortly");
    await pool.end();
  });
});
