import { listen, silentLogger } from "@core/kit";
import { remoteResolvers, ServiceTokenClient } from "@core/service-auth";
import { openDatabase } from "@core/storage";
import { createApp } from "../../src/app.js";
import { SERVICE_ID } from "../../src/index.js";
import { testBillingConfig } from "./billing.js";

/**
 * Billing in a process of its own, for the crash test: it serves `POST /usage/events` on PostgreSQL
 * until it is killed. The parent gives the database, the fake IAM and the registry, and reads the
 * port from the first line this prints.
 */
const env = (name: string) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is required`);
  return value;
};

const database = await openDatabase({ url: env("CHILD_DATABASE_URL"), poolSize: 4 });
const iamUrl = env("CHILD_IAM_URL");
const tokens = new ServiceTokenClient(iamUrl, { serviceId: SERVICE_ID, secret: env("CHILD_BILLING_SECRET") });
const app = createApp({
  db: database.db,
  logger: silentLogger(),
  config: testBillingConfig({ registryUrl: env("CHILD_REGISTRY_URL") }),
  credentials: remoteResolvers({ iamUrl, serviceId: SERVICE_ID, tokens }),
  tokens,
  mailer: { send: async () => {} },
});
const server = await listen(app, 0, "127.0.0.1");
process.stdout.write(`${JSON.stringify({ url: server.url })}\n`);
