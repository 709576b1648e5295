import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { afterAll, beforeAll } from "vitest";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { listen, silentLogger, type RunningServer } from "@core/kit";
import type { VaultAccess } from "../../src/access.js";
import { createApp } from "../../src/app.js";
import { McpSessions, type McpSessionsOptions } from "../../src/sessions.js";
import { Vault, type VaultOptions } from "../../src/vault.js";

/** The documents of the test vault: every tool has something to find. */
export const FIXTURE: Record<string, string> = {
  "services/iam.md": `---
title: IAM service
summary: Identity and access for every tenant.
service: iam
---

# IAM service

Owns users, sessions and organizations. Permissions follow [[decisions/0004-permissions]];
tenancy is explained in [[concepts/tenancy|the tenancy concept]], slugs in [[concepts/tenancy#Slugs]].
See also [[services/nowhere]].

## Routes
The device authorization flow lives here.
`,
  "services/stack-registry.md": `---
title: Stack registry
summary: Catalogue of stack templates and versions.
service: stack-registry
---

# Stack registry

Publishes immutable versions. Links back to [[services/iam]].
`,
  "concepts/tenancy.md": `---
title: Tenancy
summary: Organizations own everything.
---

# Tenancy

Every resource belongs to one organization.

## Organizations
An organization has members.

### Slugs
Slugs are lowercase letters, digits and dashes.

## Members
Members hold roles.
`,
  "decisions/0004-permissions.md": `---
title: "ADR 0004: Permissions"
summary: How permissions are granted.
adr: 4
status: accepted
date: 2026-11-01
---

# ADR 0004: Permissions

## Decision
Grants expire.
`,
  "decisions/0005-principals.md": `---
title: "ADR 0005: Principal resolution"
summary: Who is calling.
adr: 5
status: superseded
date: 2026-11-02
---

# ADR 0005: Principal resolution
Resolution of principals.
`,
  "rules/security-secrets.md": `---
title: Secrets never in logs
summary: Tokens are redacted.
domain: security
tier: 1
---

# Secrets never in logs
Redact tokens and passwords.
`,
  "rules/typescript-strict.md": `---
title: Strict TypeScript
summary: strict mode everywhere.
domain: typescript
tier: 3
---

# Strict TypeScript
No implicit any.
`,
  "cross-cutting/errors.md": `---
title: Errors
summary: One error envelope.
concern: errors
---

# Errors
Every error body is an envelope with a code.
`,
  "guides/running-locally.md": `---
title: Running locally
summary: npm start runs everything.
---

# Running locally
Run npm start; the embedded database lives in .data.
`,
};

export interface TestVault {
  root: string;
  dir: string;
  outside: string;
  write(path: string, content: string): void;
  remove(): void;
}

/**
 * A temp folder holding the vault and, beside it, a secret file the vault must never serve; with
 * `symlinks` (default) the vault also holds links pointing out of it and one pointing inside.
 */
export function makeTestVault({ symlinks = true } = {}): TestVault {
  const root = mkdtempSync(join(tmpdir(), "core-vault-"));
  const dir = join(root, "vault");
  const outside = join(root, "outside");
  mkdirSync(outside, { recursive: true });
  writeFileSync(join(outside, "secret.md"), "---\ntitle: Secret\n---\n# Secret\nTOPSECRET outside the vault\n");
  const write = (path: string, content: string) => {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), content);
  };
  for (const [path, content] of Object.entries(FIXTURE)) write(path, content);
  if (!symlinks) return { root, dir, outside, write, remove: () => rmSync(root, { recursive: true, force: true }) };
  // links that point out of the vault: a file and a folder
  symlinkSync(join(outside, "secret.md"), join(dir, "guides", "leak.md"));
  symlinkSync(outside, join(dir, "concepts", "escape"));
  // a link that stays inside is followed
  symlinkSync(join(dir, "guides", "running-locally.md"), join(dir, "guides", "alias.md"));
  return { root, dir, outside, write, remove: () => rmSync(root, { recursive: true, force: true }) };
}

export interface VaultServer {
  url: string;
  mcpUrl: string;
  vault: Vault;
  sessions: McpSessions;
  close(): Promise<void>;
}

export interface VaultServerOptions {
  /** who may read; made once the server's address is known (the resource URL names it) */
  access?: (mcpUrl: string) => VaultAccess;
  sessions?: McpSessionsOptions;
}

/** The vault's app on a real socket. */
export async function startVaultServer(dir: string, options: VaultOptions = {}, serving: VaultServerOptions = {}): Promise<VaultServer> {
  const vault = await Vault.open(dir, options);
  const sessions = new McpSessions(vault, serving.sessions);
  // the access check needs the URL the server is reached at: its port is chosen first (the
  // harness is loaded only then: it brings IAM's modules along)
  const port = serving.access ? await (await import("../../../iam/test/support/harness.js")).freePort() : 0;
  const access = serving.access?.(`http://127.0.0.1:${port}/mcp`);
  const server: RunningServer = await listen(createApp({ vault, logger: silentLogger(), sessions, ...(access ? { access } : {}) }), port, "127.0.0.1");
  return {
    url: server.url,
    mcpUrl: `${server.url}/mcp`,
    vault,
    sessions,
    close: async () => {
      await sessions.close();
      vault.close();
      await server.close();
    },
  };
}

/** The SDK's own client, initialized against the server (with `headers` on every request: a credential). */
export async function connectClient(mcpUrl: string, headers?: Record<string, string>): Promise<Client> {
  const client = new Client({ name: "vault-test", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(mcpUrl), headers ? { requestInit: { headers } } : undefined));
  return client;
}

/** A plain JSON-RPC POST that sends only `Content-Type: application/json`. */
export async function rawRpc(mcpUrl: string, method: string, params?: unknown, id: number | string = 1) {
  const response = await fetch(mcpUrl, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id, method, ...(params === undefined ? {} : { params }) }),
  });
  return { status: response.status, contentType: response.headers.get("content-type"), body: (await response.json()) as any };
}

/** The one text item of a tool result, decoded. */
export function outputOf(result: unknown): any {
  const { content, isError } = result as CallToolResult;
  if (isError) throw new Error(`tool error: ${JSON.stringify(content)}`);
  if (content.length !== 1 || content[0]!.type !== "text") throw new Error(`expected one text item, got ${JSON.stringify(content)}`);
  return JSON.parse((content[0] as { text: string }).text);
}

export function errorTextOf(result: unknown): string {
  const { content, isError } = result as CallToolResult;
  if (!isError) throw new Error(`expected a tool error, got ${JSON.stringify(content)}`);
  return (content[0] as { text: string }).text;
}

export interface ServedVault {
  files: TestVault;
  server: VaultServer;
  client: Client;
}

/**
 * A test vault served on a real socket with the SDK's client connected, set up before the tests of
 * the file (or describe block) that calls it and removed after them. Read its fields inside tests.
 */
export function servedVault(
  options: { symlinks?: boolean; prepare?: (files: TestVault) => void; vault?: VaultOptions; serving?: VaultServerOptions; client?: boolean } = {},
): ServedVault {
  const served = {} as ServedVault;
  beforeAll(async () => {
    served.files = makeTestVault({ symlinks: options.symlinks });
    options.prepare?.(served.files);
    served.server = await startVaultServer(served.files.dir, options.vault, options.serving);
    if (options.client ?? true) served.client = await connectClient(served.server.mcpUrl);
  });
  afterAll(async () => {
    await served.client?.close();
    await served.server?.close();
    served.files?.remove();
  });
  return served;
}

/** Polls until the expectation holds: file events and notifications arrive asynchronously. */
export async function eventually(check: () => void | Promise<void>, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await check();
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  }
}
