import { defineConfig } from "drizzle-kit";

export default defineConfig({
  dialect: "postgresql",
  schema: "./services/billing/src/db/schema.ts",
  out: "./services/billing/drizzle",
  schemaFilter: ["billing"],
});
