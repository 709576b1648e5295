import { defineConfig } from "drizzle-kit";

export default defineConfig({
  dialect: "postgresql",
  schema: "./services/stack-registry/src/db/schema.ts",
  out: "./services/stack-registry/drizzle",
  schemaFilter: ["stacks"],
});
