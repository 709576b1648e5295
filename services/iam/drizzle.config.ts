import { defineConfig } from "drizzle-kit";

export default defineConfig({
  dialect: "postgresql",
  schema: "./services/iam/src/db/schema.ts",
  out: "./services/iam/drizzle",
  schemaFilter: ["iam"],
});
