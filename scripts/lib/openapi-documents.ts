// The OpenAPI description of every service, generated from its routes (spec §9). Run through
// scripts/openapi.mjs, which bundles this file; the services are built on an in-memory database
// that no route touches while the description is generated (IAM's schema is migrated: its auth
// library seeds a row when it starts).
import { silentLogger, type ServiceApp } from "@core/kit";
import { join } from "node:path";
import { applyMigrations, openDatabase } from "@core/storage";
import type { CredentialResolvers } from "@core/service-auth";
import { createApp as createBillingApp } from "../../services/billing/src/app.js";
import { loadBillingConfig } from "../../services/billing/src/config.js";
import { createApp as createIamApp } from "../../services/iam/src/app.js";
import { loadIamConfig } from "../../services/iam/src/config.js";
import { createApp as createRegistryApp } from "../../services/platform-registry/src/app.js";
import { createApp as createStackRegistryApp } from "../../services/stack-registry/src/app.js";
import { createApp as createVaultApp } from "../../services/vault/src/app.js";
import { DEFAULT_VAULT_DIR } from "../../services/vault/src/config.js";
import { Vault } from "../../services/vault/src/vault.js";
import { loadCommonConfig } from "@core/kit";

export async function openApiDocuments(): Promise<Record<string, unknown>> {
  const database = await openDatabase({});
  try {
    // IAM's OAuth provider writes the vault's resource row as it starts (oauth-provider.ts): its tables must exist
    await applyMigrations(database.db, "iam", join(process.cwd(), "services/iam/drizzle"));
    const common = loadCommonConfig({ CORE_DATA_DIR: "/tmp/core-openapi" });
    const config = { ...loadIamConfig(common, { CORE_AUTH_SECRET: "openapi-generation-only-Qm9vZ2xlLTk4Nz-Y1NDMyMQ" }) };
    const noCredentials: CredentialResolvers = {
      session: async () => null,
      apiKey: async () => null,
      serviceToken: async () => null,
    };
    // the vault's HTTP surface besides POST /mcp (JSON-RPC, spec §4.7) is the kit's
    const vault = await Vault.open(DEFAULT_VAULT_DIR, { watch: false });
    // described with the test clock's two routes, marked as present only with CORE_BILLING_TEST_CLOCK=1
    const billingConfig = loadBillingConfig(common, { CORE_BILLING_TEST_CLOCK: "1" });
    const noTokens = { tokenFor: async () => "openapi-generation-only" };
    const apps: Record<string, ServiceApp> = {
      billing: createBillingApp({ db: database.db, logger: silentLogger(), config: billingConfig, credentials: noCredentials, tokens: noTokens }),
      iam: createIamApp({ db: database.db, logger: silentLogger(), config, serviceCredentials: new Map() }),
      "stack-registry": createStackRegistryApp({ db: database.db, logger: silentLogger(), credentials: noCredentials }),
      "platform-registry": createRegistryApp({ db: database.db, logger: silentLogger(), credentials: noCredentials }),
      vault: createVaultApp({ vault, logger: silentLogger() }),
    };
    return Object.fromEntries(await Promise.all(Object.entries(apps).map(async ([name, app]) => [name, await app.openApiDocument()])));
  } finally {
    await database.close();
  }
}
