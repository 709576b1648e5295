import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../../../services/iam/test/support/harness.js";
import { buildCli, freshHome, removeScratchDirs, runCli, scratchDir, STACK_FRAME } from "./support/cli.js";
import { startLiveStackRegistry } from "./support/live-stack-registry.js";

/**
 * `core stacks …` as a real process against the real stack registry (services/stack-registry), which
 * checks every credential with a real IAM; a recording proxy in between shows what the CLI sent.
 */
describe("core stacks", () => {
  let core: string;
  let registry: Awaited<ReturnType<typeof startLiveStackRegistry>>;
  let names = 0;
  beforeAll(async () => {
    [core, registry] = await Promise.all([buildCli(), startLiveStackRegistry()]);
  });
  afterAll(async () => {
    await registry?.close();
    removeScratchDirs();
  });

  /** A CORE_HOME holding a stored login (as `core login` writes it) for `token`. */
  const homeWith = (token: string) => {
    const home = freshHome();
    mkdirSync(home, { recursive: true, mode: 0o700 });
    const expiresAt = new Date(Date.now() + 3_600_000).toISOString();
    const record = { token, refreshToken: null, email: "ops@example.com", platformId: null, role: "owner", expiresAt, iamUrl: "http://127.0.0.1:1", audience: "core-cli" };
    writeFileSync(join(home, "credentials.json"), JSON.stringify(record), { mode: 0o600 });
    return home;
  };
  let publisherHome: string;
  let readerHome: string;
  beforeAll(() => {
    publisherHome = homeWith(registry.publisherToken);
    readerHome = homeWith(registry.readerToken);
  });

  /** `core stacks <args>` as the operator (stored login), against the test registry. */
  const stacks = (args: string[], env: Record<string, string> = {}, home = publisherHome) =>
    runCli(core, ["stacks", ...args], { env: { CORE_HOME: home, CORE_STACK_REGISTRY_URL: registry.url, ...env } });
  const template = async (fields: Parameters<typeof registry.createTemplate>[1] = {}) => {
    const name = `web-${Date.now().toString(36)}-${++names}`;
    await registry.createTemplate(name, fields);
    return name;
  };
  const definitionFile = (content: string) => {
    const path = join(scratchDir("definition"), "stack.json");
    writeFileSync(path, content);
    return path;
  };
  const DEFINITION = JSON.stringify({ services: ["web", "worker"], database: "postgres" });
  const publish = (name: string, version: string, sdk = "1.0.0", file = definitionFile(DEFINITION)) => stacks(["publish", name, version, "--definition", file, "--sdk", sdk]);
  const failed = (done: { code: number | null; stdout: string; stderr: string }) => {
    expect(done.code).toBe(1);
    expect(done.stderr).not.toMatch(STACK_FRAME);
    return done.stderr.trim();
  };
  const requestsSince = (count: number) => registry.requests.slice(count);

  describe("publish", () => {
    it("publishes a version with the definition as an object, the bearer token of the stored login, and says so", async () => {
      const name = await template();
      const before = registry.requests.length;
      const done = await publish(name, "1.0.0", "2.1.0");
      expect(done.stderr).toBe("");
      expect(done.code).toBe(0);
      expect(done.stdout).toMatch(new RegExp(`^Published ${name} 1\\.0\\.0 \\(core SDK 2\\.1\\.0\\) to ${registry.url}: version id \\S+\\n$`));
      const [sent] = requestsSince(before);
      expect(sent).toEqual({
        method: "POST",
        path: `/api/v1/stacks/${name}/versions`,
        authorization: `Bearer ${registry.publisherToken}`,
        body: { version: "1.0.0", stackDefinition: JSON.parse(DEFINITION), coreSdkVersion: "2.1.0" },
      });
    });

    it("publishes with an operator's API key (a CI job's credential), sent as x-api-key and never as a bearer token", async () => {
      const name = await template();
      const before = registry.requests.length;
      const withKey = await stacks(["publish", name, "1.1.0", "--definition", definitionFile(DEFINITION), "--sdk", "2.1.0"], {}, homeWith(registry.publisherApiKey));
      expect(withKey.stderr).toBe("");
      expect(withKey.code).toBe(0);
      const sent = requestsSince(before).at(-1)!;
      expect(sent).toMatchObject({ method: "POST", path: `/api/v1/stacks/${name}/versions`, apiKey: registry.publisherApiKey, authorization: undefined });
      expect((await stacks(["versions", name, "--json"], {}, homeWith(registry.publisherApiKey))).stdout).toContain('"1.1.0"');
    });

    it("--json gives the new version's id", async () => {
      const name = await template();
      const done = await stacks(["publish", name, "1.0.0-rc.1", "--definition", definitionFile(DEFINITION), "--sdk", "1.0.0", "--json"]);
      expect(done.code).toBe(0);
      expect(JSON.parse(done.stdout)).toEqual({ published: true, id: expect.any(String), name, version: "1.0.0-rc.1", coreSdkVersion: "1.0.0", registryUrl: registry.url });
    });

    it("VERSION_EXISTS: re-publishing a version is refused with the code, the message and what to do", async () => {
      const name = await template();
      expect((await publish(name, "1.0.0")).code).toBe(0);
      const message = failed(await publish(name, "1.0.0"));
      expect(message).toContain(`Publishing ${name} 1.0.0 failed: VERSION_EXISTS: Version 1.0.0 of "${name}" is already published`);
      expect(message).toContain("(HTTP 409)");
      expect(message).toContain("publish under a new version number");
      expect(message).toMatch(/\nRequest id: \S+$/);
    });

    it("--json failures carry the envelope: code, message, status, requestId, details", async () => {
      const name = await template();
      await publish(name, "1.0.0");
      const done = await stacks(["publish", name, "1.0.0", "--definition", definitionFile(DEFINITION), "--sdk", "1.0.0", "--json"]);
      expect(done.code).toBe(1);
      expect(JSON.parse(done.stdout)).toEqual({
        error: { code: "VERSION_EXISTS", message: expect.stringContaining("VERSION_EXISTS"), status: 409, requestId: expect.any(String), details: null },
      });
    });

    it("TEMPLATE_NOT_FOUND names the template and core stacks list", async () => {
      const message = failed(await publish("no-such-stack", "1.0.0"));
      expect(message).toContain('Publishing no-such-stack 1.0.0 failed: TEMPLATE_NOT_FOUND: No stack template named "no-such-stack" (HTTP 404)');
      expect(message).toContain("core stacks list");
    });

    it("TEMPLATE_DEPRECATED: a deprecated template takes no new version", async () => {
      const name = await template();
      expect((await stacks(["deprecate", name])).code).toBe(0);
      const message = failed(await publish(name, "1.0.0"));
      expect(message).toContain(`Publishing ${name} 1.0.0 failed: TEMPLATE_DEPRECATED: `);
      expect(message).toContain("(HTTP 409)");
      expect(message).toContain("make it active again first");
    });

    it("VALIDATION_ERROR lists the failing fields the registry names", async () => {
      const name = await template();
      // the spec §9 pattern allows leading zeros; semver.org, and so the registry, does not
      const message = failed(await publish(name, "01.0.0", "01.2.3"));
      expect(message).toMatch(new RegExp(`^Publishing ${name} 01\\.0\\.0 failed: VALIDATION_ERROR: Invalid \\w+: version, coreSdkVersion \\(HTTP 400\\)\n`));
      expect(message).toMatch(/\n {2}- version: \S.*semantic version/);
      expect(message).toMatch(/\n {2}- coreSdkVersion: \S.*semantic version/);
    });

    it("PAYLOAD_TOO_LARGE: a definition beyond the registry's limit", async () => {
      const name = await template();
      const big = definitionFile(JSON.stringify({ blob: "x".repeat(300 * 1024) }));
      const message = failed(await publish(name, "1.0.0", "1.0.0", big));
      expect(message).toContain(`Publishing ${name} 1.0.0 failed: PAYLOAD_TOO_LARGE: stackDefinition is `);
      expect(message).toContain("(HTTP 413)");
      expect(message).toContain("make it smaller");
    });

    it("FORBIDDEN: a credential without stacks:publish", async () => {
      const name = await template();
      const message = failed(await stacks(["publish", name, "1.0.0", "--definition", definitionFile(DEFINITION), "--sdk", "1.0.0"], {}, readerHome));
      expect(message).toContain(`Publishing ${name} 1.0.0 failed: FORBIDDEN: `);
      expect(message).toContain("(HTTP 403)");
      expect(message).toContain("stacks:publish permission, which operators have");
    });

    it("UNAUTHENTICATED: a token the registry does not accept, with core login as the way on", async () => {
      const name = await template();
      const message = failed(await stacks(["publish", name, "1.0.0", "--definition", definitionFile(DEFINITION), "--sdk", "1.0.0"], {}, homeWith("revoked-token")));
      expect(message).toContain(`Publishing ${name} 1.0.0 failed: UNAUTHENTICATED: `);
      expect(message).toContain(`The stack registry at ${registry.url} does not accept the stored token: it expired or was revoked. Run: core login`);
    });

    describe("checks what it can before sending anything", () => {
      const noRequest = async (args: string[]) => {
        const before = registry.requests.length;
        const message = failed(await stacks(args));
        expect(registry.requests.length).toBe(before);
        return message;
      };

      it("a definition file that does not exist", async () => {
        const missing = join(scratchDir("definition"), "missing.json");
        expect(await noRequest(["publish", "web", "1.0.0", "--definition", missing, "--sdk", "1.0.0"])).toBe(`Cannot read the definition file ${missing} (no such file).`);
      });

      it("a definition file that is not JSON", async () => {
        const file = definitionFile("{ services: [web] }");
        expect(await noRequest(["publish", "web", "1.0.0", "--definition", file, "--sdk", "1.0.0"])).toMatch(new RegExp(`^The definition file ${file} is not valid JSON \\(.+\\)\\.$`));
      });

      it("a definition that is JSON but not an object", async () => {
        for (const [content, found] of [["[1, 2]", "an array"], ['"web"', "a string"], ["null", "null"], ["42", "a number"]]) {
          const file = definitionFile(content!);
          expect(await noRequest(["publish", "web", "1.0.0", "--definition", file, "--sdk", "1.0.0"])).toBe(`The definition file ${file} must hold a JSON object ({ … }), not ${found}.`);
        }
      });

      it("a version or --sdk outside the spec §9 pattern", async () => {
        const file = definitionFile(DEFINITION);
        for (const bad of ["1.0", "v1.0.0", "1.0.0-", "1.0.0+build", "1.0.0-rc_1", "latest"]) {
          expect(await noRequest(["publish", "web", bad, "--definition", file, "--sdk", "1.0.0"])).toContain(`Invalid <version> "${bad}": expected MAJOR.MINOR.PATCH`);
          expect(await noRequest(["publish", "web", "1.0.0", "--definition", file, "--sdk", bad])).toContain(`Invalid --sdk "${bad}": expected MAJOR.MINOR.PATCH`);
        }
      });

      it("a template name outside the spec §8 pattern and length", async () => {
        const file = definitionFile(DEFINITION);
        for (const bad of ["Web", "web_app", "a".repeat(65)]) {
          expect(await noRequest(["publish", bad, "1.0.0", "--definition", file, "--sdk", "1.0.0"])).toContain(`Invalid template name "${bad}"`);
        }
      });

      it("--definition and --sdk are required, and so are <name> and <version>", async () => {
        expect(await noRequest(["publish", "web", "1.0.0", "--sdk", "1.0.0"])).toBe("Missing --definition <file.json>. Run: core stacks publish --help");
        expect(await noRequest(["publish", "web", "1.0.0", "--definition", "x.json"])).toBe("Missing --sdk <semver>. Run: core stacks publish --help");
        expect(await noRequest(["publish", "web"])).toBe("Missing <version>. Run: core stacks publish --help");
        expect(await noRequest(["publish", "web", "1.0.0", "extra"])).toBe('Unexpected argument "extra". Run: core stacks publish --help');
      });
    });
  });

  describe("list, show, versions", () => {
    it("list: a table of the active templates, and --json with data and total", async () => {
      const name = await template({ displayName: "Web app", domain: "web" });
      await publish(name, "1.2.0");
      const gone = await template();
      await stacks(["deprecate", gone]);

      const done = await stacks(["list"]);
      expect(done.code).toBe(0);
      const lines = done.stdout.trimEnd().split("\n");
      expect(lines[0]).toMatch(/^NAME +DISPLAY NAME +LATEST +DOMAIN +STATUS +UPDATED$/);
      const row = lines.find((line) => line.startsWith(`${name} `));
      expect(row).toMatch(new RegExp(`^${name} +Web app +1\\.2\\.0 +web +active +\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d UTC$`));
      expect(done.stdout).not.toContain(gone);
      expect(lines.at(-1)).toMatch(/^\d+ templates?$/);

      const json = JSON.parse((await stacks(["list", "--json"])).stdout);
      expect(json.total).toBe(json.data.length);
      expect(json.data.find((t: { name: string }) => t.name === name)).toMatchObject({ name, display_name: "Web app", latest_version: "1.2.0", status: "active", domain: "web" });
    });

    it("show: the template and its latest version; --json gives { template, latestVersion }", async () => {
      const name = await template({ displayName: "Web app", description: "A web app with a worker" });
      await publish(name, "1.0.0", "1.4.0");
      const done = await stacks(["show", name]);
      expect(done.code).toBe(0);
      expect(done.stdout).toContain(`${name}: Web app\n  description: A web app with a worker\n`);
      expect(done.stdout).toMatch(/ {2}latest: {6}1\.0\.0 \(core SDK 1\.4\.0, published \d{4}-\d\d-\d\d \d\d:\d\d UTC\)/);
      expect(done.stdout).toContain("  status:      active");

      const json = JSON.parse((await stacks(["show", name, "--json"])).stdout);
      expect(json.template).toMatchObject({ name, latest_version: "1.0.0" });
      expect(json.latestVersion).toMatchObject({ version: "1.0.0", core_sdk_version: "1.4.0", stack_definition: expect.any(String) });
      expect(JSON.parse(json.latestVersion.stack_definition)).toEqual(JSON.parse(DEFINITION));
    });

    it("show: a template without versions says so", async () => {
      const name = await template();
      const done = await stacks(["show", name]);
      expect(done.stdout).toContain("  latest:      none (no version published)");
    });

    it("show: TEMPLATE_NOT_FOUND", async () => {
      const message = failed(await stacks(["show", "no-such-stack"]));
      expect(message).toContain('Showing no-such-stack failed: TEMPLATE_NOT_FOUND: No stack template named "no-such-stack" (HTTP 404)');
    });

    it("versions: a table of every version with its status and SDK; --json with data and total", async () => {
      const name = await template();
      await publish(name, "1.0.0", "1.0.0");
      await publish(name, "1.1.0", "1.1.0");
      const done = await stacks(["versions", name]);
      expect(done.code).toBe(0);
      const lines = done.stdout.trimEnd().split("\n");
      expect(lines[0]).toMatch(/^VERSION +STATUS +CORE SDK +PUBLISHED$/);
      // in the registry's order (highest first)
      expect(lines[1]).toMatch(/^1\.1\.0 +active +1\.1\.0 +\d{4}-\d\d-\d\d \d\d:\d\d UTC$/);
      expect(lines[2]).toMatch(/^1\.0\.0 +active +1\.0\.0 +/);
      expect(lines[3]).toBe("2 versions");

      const json = JSON.parse((await stacks(["versions", name, "--json"])).stdout);
      expect(json.total).toBe(2);
      expect(json.data.map((v: { version: string }) => v.version).sort()).toEqual(["1.0.0", "1.1.0"]);
      expect(typeof json.data[0].stack_definition).toBe("string");
    });

    it("reads need only a valid credential (a reader can list)", async () => {
      expect((await stacks(["list"], {}, readerHome)).code).toBe(0);
    });
  });

  describe("create, update, show <name> <version>", () => {
    const fresh = () => `new-${Date.now().toString(36)}-${++names}`;

    it("create: POSTs the template with the texts given, says how to publish, and it is listed", async () => {
      const name = fresh();
      const before = registry.requests.length;
      const done = await stacks(["create", name, "--display-name", "Web app", "--description", "A web app with a database", "--domain", "web", "--icon", "https://example.com/web.svg"]);
      expect(done.stderr).toBe("");
      expect(done.code).toBe(0);
      expect(done.stdout).toMatch(new RegExp(`^Created the template ${name} \\("Web app"\\) at ${registry.url}: id \\S+\n`));
      expect(done.stdout).toContain(`Publish its first version: core stacks publish ${name} <version> --definition <file.json> --sdk <semver>`);
      expect(requestsSince(before)).toEqual([
        {
          method: "POST",
          path: "/api/v1/stacks",
          authorization: `Bearer ${registry.publisherToken}`,
          body: { name, displayName: "Web app", description: "A web app with a database", domain: "web", icon: "https://example.com/web.svg" },
        },
      ]);
      const shown = JSON.parse((await stacks(["show", name, "--json"])).stdout).template;
      expect(shown).toMatchObject({ name, display_name: "Web app", description: "A web app with a database", domain: "web", icon: "https://example.com/web.svg", status: "active" });
    });

    it("create --json gives the id; icon and domain are optional and not sent when not given", async () => {
      const name = fresh();
      const before = registry.requests.length;
      const done = await stacks(["create", name, "--display-name", "D", "--description", "d", "--json"]);
      expect(done.code).toBe(0);
      const json = JSON.parse(done.stdout);
      expect(json).toEqual({ created: true, id: expect.any(String), name, registryUrl: registry.url });
      expect(requestsSince(before)[0]!.body).toEqual({ name, displayName: "D", description: "d" });
      expect(JSON.parse((await stacks(["show", name, "--json"])).stdout).template.id).toBe(json.id);
    });

    it("create: TEMPLATE_EXISTS says names are unique and points at show and update", async () => {
      const name = await template();
      const message = failed(await stacks(["create", name, "--display-name", "Again", "--description", "d"]));
      expect(message).toContain(`Creating ${name} failed: TEMPLATE_EXISTS: `);
      expect(message).toContain(`core stacks show ${name}`);
      expect(message).toContain(`core stacks update ${name}`);
    });

    it("create: the registry's VALIDATION_ERROR names the field (a display name over 128 characters); FORBIDDEN for a reader", async () => {
      const message = failed(await stacks(["create", fresh(), "--display-name", "x".repeat(129), "--description", "d"]));
      expect(message).toContain("VALIDATION_ERROR");
      expect(message).toContain("displayName");
      const forbidden = failed(await stacks(["create", fresh(), "--display-name", "D", "--description", "d"], {}, readerHome));
      expect(forbidden).toContain("FORBIDDEN");
      expect(forbidden).toContain("stacks:publish");
    });

    it("create: the name, --display-name and --description are checked before anything is sent", async () => {
      const before = registry.requests.length;
      expect(failed(await stacks(["create", "Web_App", "--display-name", "D", "--description", "d"]))).toContain('Invalid template name "Web_App"');
      expect(failed(await stacks(["create", fresh(), "--description", "d"]))).toBe("Missing --display-name <text>. Run: core stacks create --help");
      expect(failed(await stacks(["create", fresh(), "--display-name", "D"]))).toBe("Missing --description <text>. Run: core stacks create --help");
      expect(failed(await stacks(["create", "--display-name", "D", "--description", "d"]))).toBe("Missing <name>. Run: core stacks create --help");
      expect(registry.requests.length).toBe(before);
    });

    it("update: PATCHes only the fields given, and they show", async () => {
      const name = await template({ displayName: "Old", description: "Old text", icon: "https://example.com/old.svg" });
      const before = registry.requests.length;
      const done = await stacks(["update", name, "--display-name", "New name", "--description", "New text"]);
      expect(done.code).toBe(0);
      expect(done.stdout).toBe(`Updated ${name}: display name "New name", description.\n`);
      expect(requestsSince(before)).toMatchObject([{ method: "PATCH", path: `/api/v1/stacks/${name}`, body: { displayName: "New name", description: "New text" } }]);
      const shown = JSON.parse((await stacks(["show", name, "--json"])).stdout).template;
      expect(shown).toMatchObject({ display_name: "New name", description: "New text", icon: "https://example.com/old.svg" });

      const cleared = await stacks(["update", name, "--icon", "", "--json"]);
      expect(JSON.parse(cleared.stdout)).toEqual({ ok: true, name, changed: ["icon"] });
      expect(JSON.parse((await stacks(["show", name, "--json"])).stdout).template.icon).toBe("");
    });

    it("update --reactivate: a deprecated template is listed again and takes new versions", async () => {
      const name = await template();
      await stacks(["deprecate", name]);
      expect(failed(await publish(name, "1.0.0"))).toContain(`core stacks update ${name} --reactivate`);

      const before = registry.requests.length;
      const done = await stacks(["update", name, "--reactivate"]);
      expect(done.code).toBe(0);
      expect(done.stdout).toBe(`Updated ${name}: active again (listed, and it takes new versions).\n`);
      expect(requestsSince(before)).toMatchObject([{ method: "PATCH", body: { status: "active" } }]);
      expect((await stacks(["list"])).stdout).toContain(`${name} `);
      expect((await publish(name, "1.0.0")).code).toBe(0);
    });

    it("update: nothing to change is a usage failure; TEMPLATE_NOT_FOUND and FORBIDDEN are the registry's", async () => {
      const before = registry.requests.length;
      expect(failed(await stacks(["update", "web"]))).toBe("Nothing to change: give --display-name, --description, --icon or --reactivate. Run: core stacks update --help");
      expect(registry.requests.length).toBe(before);
      expect(failed(await stacks(["update", "no-such-stack", "--reactivate"]))).toContain("Updating no-such-stack failed: TEMPLATE_NOT_FOUND");
      const name = await template();
      expect(failed(await stacks(["update", name, "--description", "x"], {}, readerHome))).toContain(`Updating ${name} failed: FORBIDDEN`);
    });

    it("show <name> <version>: that version with its definition pretty-printed; --json is the registry's version; deprecated ones too", async () => {
      const name = await template();
      await publish(name, "1.0.0", "1.3.0");
      await publish(name, "1.1.0");
      await stacks(["deprecate", name, "1.1.0"]);

      const before = registry.requests.length;
      const done = await stacks(["show", name, "1.0.0"]);
      expect(done.code).toBe(0);
      expect(requestsSince(before)).toMatchObject([{ method: "GET", path: `/api/v1/stacks/${name}/1.0.0` }]);
      const lines = done.stdout.trimEnd().split("\n");
      expect(lines.slice(0, 3)).toEqual([`${name} 1.0.0`, "  status:      active", "  core SDK:    1.3.0"]);
      expect(lines[3]).toMatch(/^ {2}published: {3}\d{4}-\d\d-\d\d \d\d:\d\d UTC$/);
      expect(lines[5]).toBe("  definition:");
      expect(JSON.parse(lines.slice(6).join("\n"))).toEqual(JSON.parse(DEFINITION));
      expect(lines[6]).toBe("    {");

      const json = JSON.parse((await stacks(["show", name, "1.1.0", "--json"])).stdout);
      expect(json).toMatchObject({ version: "1.1.0", status: "deprecated", stack_definition: expect.any(String) });
    });

    it("show <name> <version>: VERSION_NOT_FOUND points at versions; a version outside the pattern is not sent", async () => {
      const name = await template();
      const message = failed(await stacks(["show", name, "2.0.0"]));
      expect(message).toContain(`Showing ${name} 2.0.0 failed: VERSION_NOT_FOUND: `);
      expect(message).toContain(`core stacks versions ${name}`);
      const before = registry.requests.length;
      expect(failed(await stacks(["show", name, "latest"]))).toContain('Invalid <version> "latest"');
      expect(registry.requests.length).toBe(before);
    });
  });

  describe("deprecate", () => {
    it("with a version: DELETEs it; it stays listed as deprecated and latest moves down", async () => {
      const name = await template();
      await publish(name, "1.0.0");
      await publish(name, "1.1.0");
      const before = registry.requests.length;
      const done = await stacks(["deprecate", name, "1.1.0"]);
      expect(done.code).toBe(0);
      expect(done.stdout).toBe(`Deprecated ${name} 1.1.0: it stays readable, and is no longer a candidate for latest.\n`);
      expect(requestsSince(before)).toMatchObject([{ method: "DELETE", path: `/api/v1/stacks/${name}/1.1.0` }]);
      expect((await stacks(["versions", name])).stdout).toMatch(/1\.1\.0 +deprecated/);
      expect(JSON.parse((await stacks(["show", name, "--json"])).stdout).template.latest_version).toBe("1.0.0");
    });

    it("without a version: PATCHes the template's status to deprecated, and it leaves the list", async () => {
      const name = await template();
      const before = registry.requests.length;
      const done = await stacks(["deprecate", name, "--json"]);
      expect(done.code).toBe(0);
      expect(JSON.parse(done.stdout)).toEqual({ ok: true, deprecated: "template", name, version: null });
      expect(requestsSince(before)).toMatchObject([{ method: "PATCH", path: `/api/v1/stacks/${name}`, body: { status: "deprecated" } }]);
      expect((await stacks(["list"])).stdout).not.toContain(name);
    });

    it("VERSION_NOT_FOUND names the version and core stacks versions", async () => {
      const name = await template();
      const message = failed(await stacks(["deprecate", name, "9.9.9"]));
      expect(message).toContain(`Deprecating ${name} 9.9.9 failed: VERSION_NOT_FOUND: `);
      expect(message).toContain(`core stacks versions ${name}`);
    });

    it("FORBIDDEN without stacks:publish", async () => {
      const name = await template();
      expect(failed(await stacks(["deprecate", name], {}, readerHome))).toContain(`Deprecating ${name} failed: FORBIDDEN: `);
    });
  });

  describe("credentials and addresses", () => {
    it("without a credential: not logged in, run core login; nothing is sent", async () => {
      const before = registry.requests.length;
      const home = freshHome();
      expect(failed(await stacks(["list"], {}, home))).toBe(`Not logged in (no CORE_TOKEN and no ${join(home, "credentials.json")}). Run: core login`);
      expect(registry.requests.length).toBe(before);
    });

    it("--token is sent instead of CORE_TOKEN or the stored login", async () => {
      const before = registry.requests.length;
      const done = await stacks(["list", "--token", registry.readerToken], { CORE_TOKEN: "other" });
      expect(done.code).toBe(0);
      expect(requestsSince(before)[0]!.authorization).toBe(`Bearer ${registry.readerToken}`);
    });

    it("CORE_TOKEN is sent instead of the stored login, and named when refused", async () => {
      const before = registry.requests.length;
      expect((await stacks(["list"], { CORE_TOKEN: registry.readerToken })).code).toBe(0);
      expect(requestsSince(before)[0]!.authorization).toBe(`Bearer ${registry.readerToken}`);
      expect(failed(await stacks(["list"], { CORE_TOKEN: "nope" }))).toContain("does not accept the token in CORE_TOKEN");
    });

    it("--registry-url wins over CORE_STACK_REGISTRY_URL", async () => {
      const closed = `http://127.0.0.1:${await freePort()}`;
      expect((await stacks(["list", "--registry-url", registry.url], { CORE_STACK_REGISTRY_URL: closed })).code).toBe(0);
      expect(failed(await stacks(["list"], { CORE_STACK_REGISTRY_URL: closed }))).toBe(
        `Cannot reach the stack registry at ${closed} (connection refused). Check the address (--registry-url, CORE_STACK_REGISTRY_URL) or whether it runs there.`,
      );
    });

    it("defaults to http://localhost:4300, and refuses an address that is not http(s)", async () => {
      const done = await runCli(core, ["stacks", "list", "--token", "t", "--json"], { env: { CORE_HOME: freshHome(), CORE_DEBUG: "1" } });
      // whatever answers there (nothing, in a test run), the request went to the default address
      expect(done.stderr).toContain("http://localhost:4300/api/v1/stacks");
      expect(failed(await stacks(["list", "--registry-url", "localhost:4300"]))).toContain('Invalid stack registry address "localhost:4300" (from --registry-url)');
    });

    it("core stacks alone, unknown commands and --help", async () => {
      expect(failed(await stacks([]))).toBe("Missing a command: core stacks list|show|versions|create|update|publish|deprecate. Run: core stacks --help");
      expect(failed(await stacks(["frob"]))).toBe('Unknown command "stacks frob". Run: core stacks --help');
      expect((await stacks(["--help"])).stdout).toMatch(/^Usage: core stacks <command>/);
      expect((await stacks(["publish", "--help"])).stdout).toMatch(/^Usage: core stacks publish <name> <version> --definition <file.json> --sdk <semver>/);
      expect((await runCli(core, ["help", "stacks", "deprecate"])).stdout).toMatch(/^Usage: core stacks deprecate <name> \[<version>\]/);
    });
  });
});
