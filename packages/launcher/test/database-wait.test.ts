import { createServer } from "node:net";
import { describe, expect, it } from "vitest";
import pg from "pg";
import { connectFailure, databaseAddress, databaseLost, DatabaseUnavailableError, openDatabaseWhenUp } from "../src/database-wait.js";
import { freePort } from "../../../services/iam/test/support/harness.js";

/**
 * Start-up's wait for the database (DESIGN §10) against real sockets and, when TEST_DATABASE_URL is
 * set, a real PostgreSQL server: what is waited for, what is said at once, and that no sentence
 * carries the URL's password.
 */
const url = process.env.TEST_DATABASE_URL;

async function failureOf(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (err) {
    return err as Error;
  }
  throw new Error("it opened");
}

describe("databaseAddress", () => {
  it("names host and port, never the user or the password", () => {
    expect(databaseAddress("postgres://core:s3cret@db.example.com:6432/core")).toBe("db.example.com:6432");
    expect(databaseAddress("postgresql://core:s3cret@db.example.com/core")).toBe("db.example.com:5432");
    expect(databaseAddress("postgres:///core?host=/run/postgresql")).toBe("/run/postgresql");
  });
});

describe("openDatabaseWhenUp", { timeout: 30_000 }, () => {
  it("tries once with 0 seconds: one sentence naming the address and the reason, no password", async () => {
    const port = await freePort();
    const said: string[] = [];
    const err = await failureOf(openDatabaseWhenUp({ url: `postgres://core:hunter2-secret@127.0.0.1:${port}/core` }, { seconds: 0, say: (l) => said.push(l) }));
    expect(err).toBeInstanceOf(DatabaseUnavailableError);
    expect(err.message).toBe(`the database at 127.0.0.1:${port} is not answering (connection refused); start it, or check DATABASE_URL and CORE_DB_WAIT_SECONDS`);
    expect(said).toEqual([]);
  });

  it("tries again with growing waits, one line per try, then gives up after the seconds given", async () => {
    const port = await freePort();
    const said: string[] = [];
    const began = Date.now();
    const err = await failureOf(openDatabaseWhenUp({ url: `postgres://core:hunter2-secret@127.0.0.1:${port}/core` }, { seconds: 3, say: (l) => said.push(l) }));
    expect(Date.now() - began).toBeGreaterThanOrEqual(3_000);
    expect(err.message).toBe(`the database at 127.0.0.1:${port} did not answer within 3 s (connection refused); start it, or check DATABASE_URL and CORE_DB_WAIT_SECONDS`);
    expect(said.length).toBeGreaterThanOrEqual(1);
    // how long the first try took is the machine's (a loaded one may take a second): the waits grow from 1 s
    expect(said[0]).toMatch(new RegExp(`^core: the database at 127\\.0\\.0\\.1:${port} is not answering \\(connection refused\\); trying again in 1 s \\([01] s of 3\\)$`));
    if (said[1]) expect(said[1]).toMatch(new RegExp(`^core: the database at 127\\.0\\.0\\.1:${port} is not answering \\(connection refused\\); trying again in [12] s \\([12] s of 3\\)$`));
    for (const line of said) expect(line).not.toContain("hunter2");
  });

  it("tries a second time however long the first try took: a first try slower than the whole wait is not a wait", async () => {
    // a server that holds each connection 1.5 s before hanging up: the first try outlasts a 1 s wait
    const server = createServer((socket) => void setTimeout(() => socket.destroy(), 1_500));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as { port: number };
    const said: string[] = [];
    try {
      const err = await failureOf(openDatabaseWhenUp({ url: `postgres://core@127.0.0.1:${port}/core` }, { seconds: 1, say: (l) => said.push(l) }));
      expect(err.message).toBe(`the database at 127.0.0.1:${port} did not answer within 1 s (the connection ended before it was made); start it, or check DATABASE_URL and CORE_DB_WAIT_SECONDS`);
      expect(said).toHaveLength(1);
      expect(said[0]).toMatch(/trying again in 1 s \(\d+ s of 1\)$/);
    } finally {
      server.close();
    }
  });

  it("waits for a server that accepts and hangs up (as one starting or stopping): the connection ended before it was made", async () => {
    const server = createServer((socket) => socket.destroy());
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as { port: number };
    try {
      const err = await failureOf(openDatabaseWhenUp({ url: `postgres://core@127.0.0.1:${port}/core` }, { seconds: 0, say: () => {} }));
      expect(err.message).toBe(`the database at 127.0.0.1:${port} is not answering (the connection ended before it was made); start it, or check DATABASE_URL and CORE_DB_WAIT_SECONDS`);
    } finally {
      server.close();
    }
  });

  it("classifies what is waited for and what is not", () => {
    expect(connectFailure(Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), { code: "ECONNREFUSED" }))).toEqual({ reason: "connection refused", waitable: true });
    expect(connectFailure(new Error("Failed query", { cause: Object.assign(new Error("the database system is starting up"), { code: "57P03" }) }))).toEqual({
      reason: "the database system is starting up",
      waitable: true,
      sqlState: "57P03",
    });
    expect(connectFailure(Object.assign(new Error("password authentication failed"), { code: "28P01" }))?.waitable).toBe(false);
    expect(connectFailure(Object.assign(new Error('database "x" does not exist'), { code: "3D000" }))?.waitable).toBe(false);
    // a missing file is not a missing socket
    expect(connectFailure(Object.assign(new Error("ENOENT: no such file"), { code: "ENOENT", syscall: "open" }))).toBeNull();
    // nor is a query's own error a failure to connect
    expect(connectFailure(Object.assign(new Error("duplicate key"), { code: "23505" }))).toBeNull();
  });

  it("names a database that went away after it answered (migrations), and nothing else", async () => {
    const port = await freePort();
    const address = `postgres://core:hunter2-secret@127.0.0.1:${port}/core`;
    const client = new pg.Client({ connectionString: address });
    const refused = await failureOf(client.connect());
    expect(databaseLost(refused, address, "while iam's migrations were applied")?.message).toBe(
      `the database at 127.0.0.1:${port} stopped answering while iam's migrations were applied (connection refused); start it, or check DATABASE_URL`,
    );
    // the embedded database has no server to lose; a query's own error is not a lost server
    expect(databaseLost(refused, undefined, "while iam's migrations were applied")).toBeNull();
    expect(databaseLost(Object.assign(new Error("syntax error"), { code: "42601" }), address, "while iam's migrations were applied")).toBeNull();
  });

  describe.skipIf(!url)("on a real PostgreSQL server", () => {
    const server = url ? new URL(url) : null;
    const at = (user: string, database: string) => {
      const target = new URL(url!);
      target.username = user;
      target.password = "hunter2-secret";
      target.pathname = `/${database}`;
      return target.toString();
    };

    it("says at once that a database does not exist, without waiting", async () => {
      const said: string[] = [];
      const began = Date.now();
      const err = await failureOf(openDatabaseWhenUp({ url: at(server!.username || "postgres", "core_no_such_database") }, { seconds: 30, say: (l) => said.push(l) }));
      expect(err.message).toBe(`the database at ${databaseAddress(url!)} has no database "core_no_such_database"; create it, or name another in DATABASE_URL`);
      expect(said).toEqual([]);
      expect(Date.now() - began).toBeLessThan(15_000);
    });

    it("says at once that the user is refused, naming neither the user nor the password", async () => {
      const said: string[] = [];
      const err = await failureOf(openDatabaseWhenUp({ url: at("core_no_such_role", "postgres") }, { seconds: 30, say: (l) => said.push(l) }));
      expect(err.message).toMatch(new RegExp(`^the database at ${databaseAddress(url!).replace(/\./g, "\\.")} refused the (user|password) in DATABASE_URL`));
      expect(err.message).not.toContain("core_no_such_role");
      expect(err.message).not.toContain("hunter2");
      expect(said).toEqual([]);
    });
  });
});
