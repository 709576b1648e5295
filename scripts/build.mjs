// Bundles each service (dist/index.js for the launcher, dist/main.js for production) and the
// launcher with esbuild. Workspace code (@core/*) is bundled; npm dependencies stay external.
// The `core` CLI is one self-contained executable file (`--cli` builds only it).
import { build } from "esbuild";
import { chmodSync, existsSync, readFileSync, readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const root = join(dirname(fileURLToPath(import.meta.url)), "..");

/** The `core` executable (packages/cli), bundled by `bundleCli`. */
export const cliEntry = { in: join(root, "packages/cli/src/main.ts"), out: join(root, "packages/cli/dist/core"), cli: true };

export function entries() {
  const list = [];
  for (const name of readdirSync(join(root, "services"))) {
    for (const file of ["index", "main"]) {
      const src = join(root, "services", name, "src", `${file}.ts`);
      if (existsSync(src)) list.push({ in: src, out: join(root, "services", name, "dist", file) });
    }
  }
  list.push({ in: join(root, "packages/launcher/src/start.ts"), out: join(root, "packages/launcher/dist/start") });
  list.push(cliEntry);
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

/**
 * The `core` executable: everything bundled (it has no dependencies to install, so `npm pack`
 * gives a package that works anywhere), a shebang, the version of packages/cli, mode 0755.
 */
export async function bundleCli(outfile = `${cliEntry.out}.js`) {
  const { version } = JSON.parse(readFileSync(join(root, "packages/cli/package.json"), "utf8"));
  await build({
    entryPoints: [cliEntry.in],
    outfile,
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    logLevel: "warning",
    tsconfig: join(root, "tsconfig.json"),
    banner: { js: "#!/usr/bin/env node" },
    define: { CORE_CLI_VERSION: JSON.stringify(version) },
  });
  chmodSync(outfile, 0o755);
}

export async function buildAll() {
  const started = Date.now();
  for (const entry of entries()) await (entry.cli ? bundleCli() : bundle(entry.in, `${entry.out}.js`));
  return Date.now() - started;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  if (process.argv.includes("--cli")) {
    await bundleCli();
    console.log(`built ${cliEntry.out}.js`);
  } else {
    const ms = await buildAll();
    console.log(`built ${entries().length} bundles in ${ms} ms`);
  }
}
