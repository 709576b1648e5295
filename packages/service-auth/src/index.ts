export * from "./credentials.js";
export * from "./principal.js";
export * from "./remote.js";
export * from "./read-again.js";
export * from "./service-token-client.js";
export * from "./ttl-cache.js";
export * from "./resource-service.js";
