export * from "./database.js";
export * from "./pglite-template.js";
export * from "./data-dir-lock.js";
export * from "./migrate.js";
export * from "./testing.js";
export * from "./errors.js";
export * from "./keyset.js";
export * from "./read-batcher.js";
