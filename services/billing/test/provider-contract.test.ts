import { manualClock } from "@core/kit";
import { applyMigrations, testDatabases } from "@core/storage";
import { createCustomer } from "../src/customers.js";
import { migrationsFolder, SERVICE_ID } from "../src/index.js";
import { LocalProvider } from "../src/provider/local.js";
import { providerContract } from "./support/provider-contract.js";

// the embedded provider passes the contract the Stripe adapter will pass too (DESIGN §6.1)
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
}
