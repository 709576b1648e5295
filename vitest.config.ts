import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

const at = (path: string) => fileURLToPath(new URL(path, import.meta.url));

export default defineConfig({
  resolve: {
    alias: {
      "@core/kit": at("./packages/kit/src/index.ts"),
      "@core/storage": at("./packages/storage/src/index.ts"),
      "@core/service-auth": at("./packages/service-auth/src/index.ts"),
      "@core/launcher": at("./packages/launcher/src/index.ts"),
      "@core/webhooks": at("./packages/webhooks/src/index.ts"),
    },
  },
  test: {
    include: ["packages/*/test/**/*.test.ts", "services/*/test/**/*.test.ts", "test/**/*.test.ts"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // PGlite instances are heavy; two workers match the machine's two cores
    maxWorkers: 2,
    env: { NODE_ENV: "test" },
    setupFiles: [at("./test/support/setup-warnings.ts")],
  },
});
