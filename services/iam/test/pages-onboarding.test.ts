import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sql } from "drizzle-orm";
import { rowsOf, testDatabases, type DatabaseHandle } from "@core/storage";
import { call, createIam, signUp, startIamAndRegistry, uniqueSlug, type Iam } from "./support/harness.js";
import { PageBrowser, textOf } from "./support/pages.js";

const organizationsWithSlug = async (database: DatabaseHandle, slug: string) =>
  rowsOf<{ id: string }>(await database.db.execute(sql`select id from iam.organization where slug = ${slug}`));

describe.each(testDatabases())("the /onboarding page on $name", ({ open }) => {
  let database: DatabaseHandle;
  let stack: Awaited<ReturnType<typeof startIamAndRegistry>>;
  let iam: Iam;

  beforeAll(async () => {
    database = await open();
    stack = await startIamAndRegistry(database);
    iam = stack.iam;
  });
  afterAll(async () => {
    await stack?.close();
    await database?.close();
  });

  const organizationBySlug = (slug: string) => organizationsWithSlug(database, slug);

  it("sends a signed-out visitor to sign in first", async () => {
    const r = await new PageBrowser(iam).get("/onboarding");
    expect(r.status).toBe(302);
    expect(r.location).toBe("/sign-in?next=%2Fonboarding");
  });

  it("shows the org-setup form: a name and a slug with its rule", async () => {
    const ada = await signUp(iam);
    const page = await new PageBrowser(iam, ada.cookie).get("/onboarding");
    expect(page.status).toBe(200);
    expect(page.html).toContain("<h1>Set up your organization</h1>");
    expect(page.html).toMatch(/<label for="field-name">Organization name<\/label><input id="field-name" name="name" type="text"[^>]*maxlength="100"/);
    expect(page.html).toMatch(/<label for="field-slug">Slug<\/label><input id="field-slug" name="slug" type="text"[^>]*maxlength="63" pattern="\[a-z0-9\\-\]\+"/);
  });

  it("creates the organization and its platform as org-setup does, then shows them on the account page", async () => {
    const ada = await signUp(iam);
    const browser = new PageBrowser(iam, ada.cookie);
    const slug = uniqueSlug("page");
    const r = await browser.submit("/onboarding", "/onboarding", { name: "Acme Pages", slug });
    expect(r.status).toBe(303);
    expect(r.location).toBe("/account?created=organization");
    const session = await call(iam, "GET", "/api/core/session", { token: ada.token });
    expect(session.body.principal).toMatchObject({ role: "owner", orgType: "tenant" });
    const platform = await fetch(`${stack.registryUrl}/platforms/${session.body.principal.platformId}`, { headers: { authorization: `Bearer ${ada.token}` } });
    expect(await platform.json()).toMatchObject({ slug, name: "Acme Pages" });
    const account = await browser.get(r.location!);
    const text = textOf(account.html);
    expect(text).toContain("Your organization is ready, and this session now acts in it (switch below).");
    expect(text).toContain(`Acme Pages ${slug} Active here owner · platform ${session.body.principal.platformId}`);
  });

  it("says a taken slug is taken (409), on the slug field, keeping what was typed", async () => {
    const ada = await signUp(iam);
    const slug = uniqueSlug("taken");
    const browser = new PageBrowser(iam, ada.cookie);
    expect((await browser.submit("/onboarding", "/onboarding", { name: "First", slug })).status).toBe(303);
    const r = await browser.submit("/onboarding", "/onboarding", { name: "Second", slug });
    expect(r.status).toBe(409);
    expect(r.html).toMatch(new RegExp(`<input id="field-slug" name="slug" type="text" value="${slug}"[^>]*aria-invalid="true" aria-describedby="field-slug-hint field-slug-error"`));
    expect(r.html).toContain(`<p class="field-error" id="field-slug-error">The slug &quot;${slug}&quot; is taken. Choose another.</p>`);
    expect(r.html).toContain('value="Second"');
  });

  it.each([
    ["a slug with capitals", { name: "Acme", slug: "Acme" }, ["slug"]],
    ["a slug of 64 characters", { name: "Acme", slug: "a".repeat(64) }, ["slug"]],
    ["an empty name", { name: "", slug: "fine-slug" }, ["name"]],
    ["a name of 101 characters", { name: "n".repeat(101), slug: "fine-slug-2" }, ["name"]],
  ])("refuses %s with 400 and a message on that field, creating nothing", async (_, input, fields) => {
    const ada = await signUp(iam);
    const r = await new PageBrowser(iam, ada.cookie).submit("/onboarding", "/onboarding", input);
    expect(r.status).toBe(400);
    for (const field of ["name", "slug"]) {
      expect(r.html.includes(`id="field-${field}-error"`)).toBe(fields.includes(field));
    }
    expect(await organizationBySlug(input.slug)).toEqual([]);
  });

  it("accepts the limits themselves: a slug of 63 characters and a name of 100", async () => {
    const ada = await signUp(iam);
    const slug = `${uniqueSlug("edge")}-`.padEnd(63, "x");
    const r = await new PageBrowser(iam, ada.cookie).submit("/onboarding", "/onboarding", { name: "n".repeat(100), slug });
    expect(r.status).toBe(303);
    expect(await organizationBySlug(slug)).toHaveLength(1);
  });

  it("refuses the form without the CSRF token, creating nothing", async () => {
    const ada = await signUp(iam);
    const slug = uniqueSlug("csrf");
    const r = await new PageBrowser(iam, ada.cookie).post("/onboarding", { name: "Acme", slug });
    expect(r.status).toBe(403);
    expect(await organizationBySlug(slug)).toEqual([]);
  });
});

describe.each(testDatabases())("the /onboarding page without a platform registry on $name", ({ open }) => {
  let database: DatabaseHandle;

  beforeAll(async () => {
    database = await open();
  });
  afterAll(async () => {
    await database?.close();
  });

  it("says to send the form again when the registry cannot be reached (503), and keeps the set-up open for its owner only", async () => {
    const iam = await createIam(database);
    const ada = await signUp(iam);
    const slug = uniqueSlug("down");
    const r = await new PageBrowser(iam, ada.cookie).submit("/onboarding", "/onboarding", { name: "Acme", slug });
    expect(r.status).toBe(503);
    expect(textOf(r.html)).toContain("The platform could not be created just now. Send the form again in a moment to finish: the name is kept for you.");
    // open, not half-made: no platform yet, and the sweeper or the owner's next try finishes it
    const open = rowsOf(await database.db.execute(sql`select o.platform_id from iam.org_setups s join iam.organization o on o.id = s.org_id where o.slug = ${slug}`));
    expect(open).toEqual([{ platform_id: null }]);
    const again = await new PageBrowser(iam, ada.cookie).submit("/onboarding", "/onboarding", { name: "Acme", slug });
    expect(again.status).toBe(503);
    expect(await organizationsWithSlug(database, slug)).toHaveLength(1);
  });
});
