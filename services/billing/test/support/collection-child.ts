import { systemClock } from "@core/kit";
import { LocalProvider } from "../../src/provider/local.js";
import { serveBillingChild } from "./child.js";

/**
 * Billing in a process of its own for the crash test of collection (DESIGN §6.9): the test clock,
 * its worker passing every 50 ms, and a local provider that takes a little time before and after each
 * charge, so a kill can land anywhere in a collection.
 */
const pause = () => new Promise<void>((resolve) => setTimeout(resolve, Math.floor(Math.random() * 40)));
await serveBillingChild({ testClock: true, workerIntervalMs: 50 }, (db, config) => ({
  chargeDeadlineMs: 2_000,
  provider: new LocalProvider(db, systemClock, config.billingUrl, { beforeCharge: pause, afterCharge: pause }),
}));
