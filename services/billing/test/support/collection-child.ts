import { listen, silentLogger, systemClock } from "@core/kit";
import { remoteResolvers, ServiceTokenClient } from "@core/service-auth";
import { openDatabase } from "@core/storage";
import { createApp } from "../../src/app.js";
import { SERVICE_ID } from "../../src/index.js";
import { LocalProvider } from "../../src/provider/local.js";
import { testBillingConfig } from "./billing.js";

/**
 * Billing in a process of its own, for the crash test of collection (DESIGN §6.9): on PostgreSQL,
 * with the test clock, its worker passing every 50 ms, and a local provider that takes a little
 * time before and after each charge, so a kill can land anywhere in a collection. The parent gives
 * the database, the fake IAM and the registry, and reads the port from the first line this prints.
 */
const env = (name: string) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is required`);
  return value;
};

const database = await openDatabase({ url: env("CHILD_DATABASE_URL"), poolSize: 6 });
const iamUrl = env("CHILD_IAM_URL");
const tokens = new ServiceTokenClient(iamUrl, { serviceId: SERVICE_ID, secret: env("CHILD_BILLING_SECRET") });
const config = testBillingConfig({ registryUrl: env("CHILD_REGISTRY_URL"), testClock: true, workerIntervalMs: 50 });
const pause = () => new Promise<void>((resolve) => setTimeout(resolve, Math.floor(Math.random() * 40)));
const app = createApp({
  db: database.db,
  logger: silentLogger(),
  config,
  credentials: remoteResolvers({ iamUrl, serviceId: SERVICE_ID, tokens }),
  tokens,
  mailer: { send: async () => {} },
  chargeDeadlineMs: 2_000,
  provider: new LocalProvider(database.db, systemClock, config.billingUrl, { beforeCharge: pause, afterCharge: pause }),
});
app.ctx.worker.start();
const server = await listen(app, 0, "127.0.0.1");
process.stdout.write(`${JSON.stringify({ url: server.url })}\n`);
