import { spawn, type ChildProcess } from "node:child_process";
import { listen, silentLogger } from "@core/kit";
import { remoteResolvers, ServiceTokenClient } from "@core/service-auth";
import { openDatabase, type Db } from "@core/storage";
import { createApp, type BillingDeps } from "../../src/app.js";
import type { BillingConfig } from "../../src/config.js";
import { SERVICE_ID } from "../../src/index.js";
import { testBillingConfig, type Billing } from "./billing.js";

/**
 * Billing in a process of its own, for the crash tests (SIGKILL mid-work on PostgreSQL). The parent
 * (`startBillingChild`) gives the database, the fake IAM and the registry of its own billing; the
 * child (`serveBillingChild`, in the script the parent names) serves billing on a free port and
 * prints `{ "url": … }` as its first line.
 */
export async function startBillingChild(b: Billing, script: string): Promise<{ process: ChildProcess; url: string }> {
  const proc = spawn(process.execPath, ["--import", "tsx", script], {
    env: { ...process.env, CHILD_DATABASE_URL: b.databaseUrl!, CHILD_IAM_URL: b.iam.url, CHILD_REGISTRY_URL: b.registryUrl, CHILD_BILLING_SECRET: "billing-secret" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let errors = "";
  proc.stderr!.on("data", (chunk: Buffer) => (errors += chunk.toString()));
  const url = await new Promise<string>((resolve, reject) => {
    let out = "";
    proc.stdout!.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      if (out.includes("\n")) resolve((JSON.parse(out.split("\n")[0]!) as { url: string }).url);
    });
    proc.on("exit", (code) => reject(new Error(`the child exited (${code}) before it listened: ${errors}`)));
  });
  return { process: proc, url };
}

const env = (name: string) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is required`);
  return value;
};

/** The child's side: billing on the parent's database, with the config and deps its test wants. */
export async function serveBillingChild(config: Partial<BillingConfig>, deps: (db: Db, config: BillingConfig) => Partial<BillingDeps> = () => ({})): Promise<void> {
  const database = await openDatabase({ url: env("CHILD_DATABASE_URL"), poolSize: 6 });
  const iamUrl = env("CHILD_IAM_URL");
  const tokens = new ServiceTokenClient(iamUrl, { serviceId: SERVICE_ID, secret: env("CHILD_BILLING_SECRET") });
  const full = testBillingConfig({ registryUrl: env("CHILD_REGISTRY_URL"), ...config });
  const app = createApp({
    db: database.db,
    logger: silentLogger(),
    config: full,
    credentials: remoteResolvers({ iamUrl, serviceId: SERVICE_ID, tokens }),
    tokens,
    mailer: { send: async () => {} },
    ...deps(database.db, full),
  });
  if (full.workerIntervalMs < 60_000) app.ctx.worker.start();
  const server = await listen(app, 0, "127.0.0.1");
  process.stdout.write(`${JSON.stringify({ url: server.url })}\n`);
}
