export * from "./address.js";
export * from "./dispatcher.js";
export * from "./endpoints.js";
export * from "./outbox.js";
export * from "./signing.js";
export * from "./tables.js";
