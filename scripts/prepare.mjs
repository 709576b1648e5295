// `npm ci` / `npm install` (the root package's prepare script): builds what `npm start` runs and
// makes the PGlite template data directory, so a first `npm start` has neither to do (ADR 0016).
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { bundle, launcherEntry, root } from "./build.mjs";

const started = Date.now();
await bundle(launcherEntry.in, `${launcherEntry.out}.js`, { dependencies: "bundled" });
console.log(`core: built the launcher in ${Date.now() - started} ms`);

const script = join(root, "node_modules/.cache/core/pglite-template.mjs");
await bundle(join(root, "scripts/lib/pglite-template.ts"), script);
await import(pathToFileURL(script).href);
