import { manualClock } from "@core/kit";
import { applyMigrations, testDatabases } from "@core/storage";
import { createCustomer } from "../src/customers.js";
import { migrationsFolder, SERVICE_ID } from "../src/index.js";
import { LocalProvider } from "../src/provider/local.js";
import { StripeProvider, stripeClient } from "../src/provider/stripe.js";
import { startFakeStripe } from "./support/fake-stripe.js";
import { providerContract } from "./support/provider-contract.js";

// both providers pass one contract (DESIGN §6.1): the embedded one, and Stripe's through the real
// SDK against our fake of the Stripe API
for (const database of testDatabases()) {
  providerContract(`local on ${database.name}`, async () => {
    const handle = await database.open();
    await applyMigrations(handle.db, SERVICE_ID, migrationsFolder);
    const clock = manualClock(new Date("2026-01-31T10:00:00.000Z"));
    return {
      provider: new LocalProvider(handle.db, clock),
      newCustomer: async () => (await createCustomer(handle.db, clock.now(), { email: "contract@example.com", currency: "usd" })).id,
      close: () => handle.close(),
    };
  });

  providerContract(`stripe (the SDK against a fake Stripe) on ${database.name}`, async () => {
    const [handle, stripe] = await Promise.all([database.open(), startFakeStripe()]);
    await applyMigrations(handle.db, SERVICE_ID, migrationsFolder);
    const clock = manualClock(new Date("2026-01-31T10:00:00.000Z"));
    return {
      provider: new StripeProvider(handle.db, stripeClient({ secretKey: stripe.secretKey, apiBase: stripe.url, timeoutMs: 2_000 })),
      newCustomer: async () => (await createCustomer(handle.db, clock.now(), { email: "contract@example.com", currency: "usd" })).id,
      close: async () => {
        await stripe.close();
        await handle.close();
      },
    };
  });
}
