// Bundles each service (dist/index.js for the launcher, dist/main.js for production) and the
// launcher with esbuild. Workspace code (@core/*) is bundled; npm dependencies stay external.
import { build } from "esbuild";
import { existsSync, readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const root = join(dirname(fileURLToPath(import.meta.url)), "..");

export function entries() {
  const list = [];
  for (const name of readdirSync(join(root, "services"))) {
    for (const file of ["index", "main"]) {
      const src = join(root, "services", name, "src", `${file}.ts`);
      if (existsSync(src)) list.push({ in: src, out: join(root, "services", name, "dist", file) });
    }
  }
  list.push({ in: join(root, "packages/launcher/src/start.ts"), out: join(root, "packages/launcher/dist/start") });
  return list;
}

const externalDependencies = {
  name: "external-dependencies",
  setup(b) {
    b.onResolve({ filter: /^[^./]/ }, (args) => (args.path.startsWith("@core/") ? undefined : { path: args.path, external: true }));
  },
};

/** Bundles one TypeScript entry into one ESM file for Node 20. */
export function bundle(entry, outfile) {
  return build({
    entryPoints: [entry],
    outfile,
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    sourcemap: true,
    logLevel: "warning",
    tsconfig: join(root, "tsconfig.json"),
    plugins: [externalDependencies],
  });
}

export async function buildAll() {
  const started = Date.now();
  for (const entry of entries()) await bundle(entry.in, `${entry.out}.js`);
  return Date.now() - started;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const ms = await buildAll();
  console.log(`built ${entries().length} bundles in ${ms} ms`);
}
