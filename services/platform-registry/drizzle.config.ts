import { defineConfig } from "drizzle-kit";

export default defineConfig({
  dialect: "postgresql",
  schema: "./services/platform-registry/src/db/schema.ts",
  out: "./services/platform-registry/drizzle",
  schemaFilter: ["registry"],
});
