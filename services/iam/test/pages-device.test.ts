import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabases, type DatabaseHandle } from "@core/storage";
import { call, createIam, signUp, type Iam } from "./support/harness.js";
import { oauth, pollToken } from "./support/device.js";
import { hiddenFields, PageBrowser, textOf } from "./support/pages.js";

const CLI_AGENT = "core-cli/0.1.0 (node v20; linux)";

/** A device login started the way the CLI starts it, from an address and a program of its own. */
async function startFromCli(iam: Iam) {
  const r = await oauth(iam, "/oauth/device/code", { client_id: "core-cli" }, { headers: { "user-agent": CLI_AGENT } });
  if (r.status !== 200) throw new Error(`device code refused: ${JSON.stringify(r.body)}`);
  return r.body as { device_code: string; user_code: string; verification_uri_complete: string };
}

describe.each(testDatabases())("the /device activation page on $name", ({ open }) => {
  let database: DatabaseHandle;
  let iam: Iam;

  beforeAll(async () => {
    database = await open();
    iam = await createIam(database);
  });
  afterAll(async () => {
    await database?.close();
  });

  /** the decision form of the confirm page, submitted with `decision` */
  async function decide(browser: PageBrowser, userCode: string, decision: "approve" | "deny") {
    const confirm = await browser.get(`/device?user_code=${userCode}`);
    expect(confirm.status).toBe(200);
    return browser.post("/device", { ...hiddenFields(confirm.html, "/device"), decision });
  }

  it("sends a signed-out visitor to sign in, coming back to the code afterwards", async () => {
    const device = await startFromCli(iam);
    const r = await new PageBrowser(iam).get(`/device?user_code=${device.user_code}`);
    expect(r.status).toBe(302);
    expect(r.location).toBe(`/sign-in?next=${encodeURIComponent(`/device?user_code=${device.user_code}`)}`);
    expect((await new PageBrowser(iam).get("/device")).location).toBe("/sign-in?next=%2Fdevice");
  });

  it("the address the CLI prints opens the confirm page for that code", async () => {
    const device = await startFromCli(iam);
    const address = new URL(device.verification_uri_complete);
    expect(address.pathname).toBe("/device");
    const ada = await signUp(iam);
    const page = await new PageBrowser(iam, ada.cookie).get(address.pathname + address.search);
    expect(page.status).toBe(200);
    expect(page.html).toContain(`<p class="code">${device.user_code}</p>`);
  });

  it("asks for the code when none is given, with a labelled field", async () => {
    const ada = await signUp(iam);
    const page = await new PageBrowser(iam, ada.cookie).get("/device");
    expect(page.status).toBe(200);
    expect(page.html).toContain("<h1>Connect a device</h1>");
    expect(page.html).toMatch(/<form method="get" action="\/device"><div class="field"><label for="field-user_code">Code<\/label><input id="field-user_code" name="user_code"/);
  });

  it("shows what is asking: the code, the program and address that asked, when, and Approve and Deny", async () => {
    const device = await startFromCli(iam);
    const ada = await signUp(iam);
    iam.clock.advance(120_000);
    const page = await new PageBrowser(iam, ada.cookie).get(`/device?user_code=${device.user_code}`);
    expect(page.status).toBe(200);
    expect(page.html).toContain("<h1>Approve this sign-in?</h1>");
    const text = textOf(page.html);
    expect(text).toContain(`A device is asking to sign in to Core as ${ada.email}.`);
    expect(text).toContain(`Program ${CLI_AGENT}`);
    expect(text).toContain("From address 127.0.0.1");
    expect(text).toContain("Asked 2 minutes ago");
    expect(text).toContain("Code expires in 8 minutes");
    expect(page.html).toContain('<button type="submit" name="decision" value="approve">Approve</button>');
    expect(page.html).toContain('<button type="submit" name="decision" value="deny" class="secondary">Deny</button>');
    expect(hiddenFields(page.html, "/device")).toMatchObject({ user_code: device.user_code, csrf: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/) });
  });

  it("accepts the code in any case, with or without the dash", async () => {
    const device = await startFromCli(iam);
    const ada = await signUp(iam);
    const page = await new PageBrowser(iam, ada.cookie).get(`/device?user_code=${device.user_code.replace("-", "").toLowerCase()}`);
    expect(page.status).toBe(200);
    expect(page.html).toContain(`<p class="code">${device.user_code}</p>`);
  });

  it("approves: the page says so and the CLI's next poll gets its tokens", async () => {
    const device = await startFromCli(iam);
    const ada = await signUp(iam);
    const browser = new PageBrowser(iam, ada.cookie);
    const posted = await decide(browser, device.user_code, "approve");
    // POST/redirect/GET: the result is a page of its own
    expect(posted.status).toBe(303);
    expect(posted.location).toMatch(/^\/device\/decided\/[A-Za-z0-9_-]+$/);
    const r = await browser.get(posted.location!);
    expect(r.status).toBe(200);
    expect(r.html).toContain("<h1>Device approved</h1>");
    expect(textOf(r.html)).toContain("Device approved — you can return to your terminal.");
    const polled = await pollToken(iam, device.device_code);
    expect(polled.status).toBe(200);
    const whoami = await call(iam, "POST", "/api/v1/cli/whoami", { token: polled.body.access_token });
    expect(whoami.body.email).toBe(ada.email);
    // a reload, after the CLI took its tokens too, shows the same success
    const reloaded = await browser.get(posted.location!);
    expect(reloaded.status).toBe(200);
    expect(reloaded.html).toContain("<h1>Device approved</h1>");
  });

  it("shows a decision only to the person who made it: anyone else's or an unknown one is 404", async () => {
    const device = await startFromCli(iam);
    const ada = await signUp(iam);
    const posted = await decide(new PageBrowser(iam, ada.cookie), device.user_code, "approve");
    const bob = await signUp(iam);
    const theirs = await new PageBrowser(iam, bob.cookie).get(posted.location!);
    expect(theirs.status).toBe(404);
    expect(theirs.html).toContain("<h1>No such sign-in</h1>");
    expect((await new PageBrowser(iam, ada.cookie).get("/device/decided/nothing-here")).status).toBe(404);
    // signed out: sign in first
    expect((await new PageBrowser(iam).get(posted.location!)).location).toBe("/sign-in?next=%2Fdevice");
  });

  it("denies: the page says 'Request denied' and the CLI's next poll gets access_denied", async () => {
    const device = await startFromCli(iam);
    const ada = await signUp(iam);
    const browser = new PageBrowser(iam, ada.cookie);
    const posted = await decide(browser, device.user_code, "deny");
    expect(posted.status).toBe(303);
    const r = await browser.get(posted.location!);
    expect(r.status).toBe(200);
    expect(r.html).toContain("<h1>Request denied</h1>");
    const polled = await pollToken(iam, device.device_code);
    expect(polled.body.error).toBe("access_denied");
  });

  it("says 'Code not found or expired' with 404 for an unknown code, offering to enter it again", async () => {
    const ada = await signUp(iam);
    const page = await new PageBrowser(iam, ada.cookie).get("/device?user_code=BCDF-GHJK");
    expect(page.status).toBe(404);
    expect(page.html).toContain("<h1>Code not found or expired</h1>");
    expect(page.html).toMatch(/<input id="field-user_code" name="user_code" type="text" value="BCDF-GHJK"[^>]*aria-invalid="true"/);
  });

  it("says 'Code not found or expired' for a code past its lifetime, and for one answered already", async () => {
    const ada = await signUp(iam);
    const browser = new PageBrowser(iam, ada.cookie);
    const expiring = await startFromCli(iam);
    const answered = await startFromCli(iam);
    const confirm = await browser.get(`/device?user_code=${answered.user_code}`);
    expect((await browser.post("/device", { ...hiddenFields(confirm.html, "/device"), decision: "approve" })).status).toBe(303);
    // the same confirm page submitted twice: the second answer finds nothing to answer
    const twice = await browser.post("/device", { ...hiddenFields(confirm.html, "/device"), decision: "deny" });
    expect(twice.status).toBe(404);
    expect(twice.html).toContain("<h1>Code not found or expired</h1>");
    expect((await pollToken(iam, answered.device_code)).status).toBe(200);
    expect((await browser.get(`/device?user_code=${expiring.user_code}`)).status).toBe(200);
    iam.clock.advance(600_000);
    expect((await browser.get(`/device?user_code=${expiring.user_code}`)).status).toBe(404);
  });

  it("refuses Approve without the CSRF token (403 page), and the login stays pending", async () => {
    const device = await startFromCli(iam);
    const ada = await signUp(iam);
    const r = await new PageBrowser(iam, ada.cookie).post("/device", { user_code: device.user_code, decision: "approve" });
    expect(r.status).toBe(403);
    expect(r.headers.get("content-type")).toMatch(/^text\/html/);
    expect((await pollToken(iam, device.device_code)).body.error).toBe("authorization_pending");
  });

  it("refuses Approve with another session's CSRF token", async () => {
    const device = await startFromCli(iam);
    const ada = await signUp(iam);
    const mallory = await signUp(iam);
    const token = hiddenFields((await new PageBrowser(iam, mallory.cookie).get(`/device?user_code=${device.user_code}`)).html, "/device").csrf!;
    const r = await new PageBrowser(iam, ada.cookie).post("/device", { csrf: token, user_code: device.user_code, decision: "approve" });
    expect(r.status).toBe(403);
    expect((await pollToken(iam, device.device_code)).body.error).toBe("authorization_pending");
  });

  it("refuses Approve posted from another origin, even with the right token", async () => {
    const device = await startFromCli(iam);
    const ada = await signUp(iam);
    const browser = new PageBrowser(iam, ada.cookie);
    const fields = hiddenFields((await browser.get(`/device?user_code=${device.user_code}`)).html, "/device");
    const r = await browser.post("/device", { ...fields, decision: "approve" }, { origin: "https://evil.example" });
    expect(r.status).toBe(403);
    expect(r.html).toContain("<h1>Request refused</h1>");
    expect((await pollToken(iam, device.device_code)).body.error).toBe("authorization_pending");
  });

  it("sends a signed-out Approve to sign in again (401 page), never JSON", async () => {
    const device = await startFromCli(iam);
    const r = await new PageBrowser(iam).post("/device", { user_code: device.user_code, decision: "approve" });
    expect(r.status).toBe(401);
    expect(r.headers.get("content-type")).toMatch(/^text\/html/);
    expect(textOf(r.html)).toContain("Your session has ended. Sign in again to continue.");
  });

  it("asks again when the form names neither Approve nor Deny", async () => {
    const device = await startFromCli(iam);
    const ada = await signUp(iam);
    const browser = new PageBrowser(iam, ada.cookie);
    const fields = hiddenFields((await browser.get(`/device?user_code=${device.user_code}`)).html, "/device");
    const r = await browser.post("/device", { ...fields, decision: "maybe" });
    expect(r.status).toBe(400);
    expect((await pollToken(iam, device.device_code)).body.error).toBe("authorization_pending");
  });
});

describe.each(testDatabases())("the /device page's limit on wrong codes on $name", ({ open }) => {
  let database: DatabaseHandle;

  beforeAll(async () => {
    database = await open();
  });
  afterAll(async () => {
    await database?.close();
  });

  it("counts wrong codes looked up on the page and answered by the JSON route together: 429 after the limit, even for a right code", async () => {
    const iam = await createIam(database, { config: { rateLimits: { enabled: true, userCodeFailures: 3 } } });
    const ada = await signUp(iam);
    const browser = new PageBrowser(iam, ada.cookie);
    const device = await startFromCli(iam);
    expect((await browser.get("/device?user_code=BCDF-GHJK")).status).toBe(404);
    expect((await call(iam, "POST", "/oauth/device/authorize", { token: ada.token, body: { user_code: "BCDF-GHJL" } })).status).toBe(404);
    // just inside the limit: the right code still opens
    expect((await browser.get(`/device?user_code=${device.user_code}`)).status).toBe(200);
    expect((await browser.get("/device?user_code=BCDF-GHJM")).status).toBe(404);
    const limited = await browser.get(`/device?user_code=${device.user_code}`);
    expect(limited.status).toBe(429);
    expect(limited.html).toContain("<h1>Too many attempts</h1>");
    expect(textOf(limited.html)).toMatch(/Too many attempts\. Wait \d+ seconds, then try again\./);
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    // another user is not held back by ada's mistakes
    const bob = await signUp(iam);
    expect((await new PageBrowser(iam, bob.cookie).get(`/device?user_code=${device.user_code}`)).status).toBe(200);
  });
});
