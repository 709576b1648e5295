// `npm run openapi` writes openapi/<service>.json from the routes; `--check` fails when the
// committed descriptions differ from what the code generates (spec §9: drift is checked in CI).
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { bundle, root } from "./build.mjs";

const out = join(root, "node_modules/.cache/core/openapi-documents.mjs");
mkdirSync(join(root, "node_modules/.cache/core"), { recursive: true });
await bundle(join(root, "scripts/lib/openapi-documents.ts"), out);
const { openApiDocuments } = await import(pathToFileURL(out).href);
const documents = await openApiDocuments();
const check = process.argv.includes("--check");
let drift = 0;
mkdirSync(join(root, "openapi"), { recursive: true });
for (const [name, document] of Object.entries(documents)) {
  const file = join(root, "openapi", `${name}.json`);
  const text = `${JSON.stringify(document, null, 2)}\n`;
  if (!check) {
    writeFileSync(file, text);
    console.log(`wrote openapi/${name}.json`);
    continue;
  }
  let committed = "";
  try {
    committed = readFileSync(file, "utf8");
  } catch {}
  if (committed !== text) {
    drift++;
    console.error(`openapi/${name}.json differs from what the routes generate: run npm run openapi and commit the result`);
  }
}
if (drift) process.exit(1);
if (check) console.log(`openapi: ${Object.keys(documents).length} descriptions match the routes`);
