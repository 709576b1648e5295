// Runs a TypeScript benchmark from bench/: bundles it with esbuild (workspace code included,
// npm dependencies external) and imports it. `npm run bench` runs validate-session.ts.
import { mkdirSync } from "node:fs";
import { basename, join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { bundle, root } from "../scripts/build.mjs";

const entry = resolve(process.argv[2] ?? join(root, "bench/validate-session.ts"));
const out = join(root, "node_modules/.cache/core/bench", basename(entry).replace(/\.ts$/, ".mjs"));
mkdirSync(join(root, "node_modules/.cache/core/bench"), { recursive: true });
await bundle(entry, out);
// a benchmark that runs part of itself in another process forks its own bundle
process.env.BENCH_BUNDLE = out;
await import(pathToFileURL(out).href);
