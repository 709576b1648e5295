import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isForeignKeyViolation, isUniqueViolation, testDatabases, type DatabaseHandle } from "@core/storage";

/** The error a query raises, so tests can look at what the real driver throws. */
async function failureOf(query: Promise<unknown>): Promise<unknown> {
  try {
    await query;
  } catch (err) {
    return err;
  }
  throw new Error("the query was expected to fail");
}

describe.each(testDatabases())("driver errors on $name", ({ open }) => {
  let handle: DatabaseHandle;
  beforeAll(async () => {
    handle = await open();
    await handle.db.execute(sql`create table owners (id text primary key)`);
    await handle.db.execute(sql`create table pets (id text primary key, owner_id text references owners(id), name text not null)`);
    await handle.db.execute(sql`create unique index pets_name_key on pets (name)`);
    await handle.db.execute(sql`insert into owners values ('o1')`);
    await handle.db.execute(sql`insert into pets values ('p1', 'o1', 'rex')`);
  });
  afterAll(async () => {
    await handle?.close();
  });

  it("recognises a real unique violation (23505), by any constraint and by its own name", async () => {
    const err = await failureOf(handle.db.execute(sql`insert into pets values ('p2', 'o1', 'rex')`));
    expect(isUniqueViolation(err)).toBe(true);
    expect(isUniqueViolation(err, "pets_name_key")).toBe(true);
    expect(isUniqueViolation(err, "pets_pkey")).toBe(false);
    expect(isForeignKeyViolation(err)).toBe(false);
  });

  it("names the primary key when the primary key is what collides", async () => {
    const err = await failureOf(handle.db.execute(sql`insert into pets values ('p1', 'o1', 'fido')`));
    expect(isUniqueViolation(err, "pets_pkey")).toBe(true);
    expect(isUniqueViolation(err, "pets_name_key")).toBe(false);
  });

  it("recognises a real foreign key violation (23503) and does not take it for a unique one", async () => {
    const err = await failureOf(handle.db.execute(sql`insert into pets values ('p3', 'nobody', 'max')`));
    expect(isForeignKeyViolation(err)).toBe(true);
    expect(isUniqueViolation(err)).toBe(false);
  });

  it("takes other database errors for neither", async () => {
    const err = await failureOf(handle.db.execute(sql`insert into pets values ('p4', 'o1', null)`));
    expect(isUniqueViolation(err)).toBe(false);
    expect(isForeignKeyViolation(err)).toBe(false);
  });
});

describe("isUniqueViolation outside the database", () => {
  it("is false for errors without an SQLSTATE", () => {
    expect(isUniqueViolation(new Error("23505"))).toBe(false);
    expect(isUniqueViolation(null)).toBe(false);
    expect(isUniqueViolation({ code: "ECONNREFUSED" })).toBe(false);
  });
});
