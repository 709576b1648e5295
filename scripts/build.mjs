// Bundles the launcher (every service in one file, for `npm start`), each service's production entry
// (dist/main.js) and the CLI with esbuild. Workspace code (@core/*) is always bundled; npm
// dependencies are bundled too, except those that load files next to themselves (see LEFT_EXTERNAL):
// one file to read instead of about 1,200 small modules is most of a fast start (ADR 0016).
// The `core` CLI is one self-contained executable file (`--cli` builds only it).
import { build } from "esbuild";
import { chmodSync, existsSync, readFileSync, readdirSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { dirname, extname, join, relative, sep } from "node:path";
import { fileURLToPath } from "node:url";

export const root = join(dirname(fileURLToPath(import.meta.url)), "..");

/** The `core` executable (packages/cli), bundled by `bundleCli`. */
export const cliEntry = { in: join(root, "packages/cli/src/main.ts"), out: join(root, "packages/cli/dist/core"), cli: true };

/** The launcher: every service in one bundle (`npm start`). */
export const launcherEntry = { in: join(root, "packages/launcher/src/start.ts"), out: join(root, "packages/launcher/dist/start") };

export function entries() {
  const list = [];
  for (const name of readdirSync(join(root, "services"))) {
    const src = join(root, "services", name, "src", "main.ts");
    if (existsSync(src)) list.push({ in: src, out: join(root, "services", name, "dist", "main") });
  }
  list.push(launcherEntry);
  list.push(cliEntry);
  return list;
}

/**
 * npm packages that stay in node_modules: PGlite reads its WASM and data files next to its own
 * module, pg has an optional native binding, pino starts worker threads from files of its own,
 * pdfkit loads its standard fonts through its own package's imports map (billing's invoice PDFs).
 * OpenTelemetry's SDK is imported only when spans are exported (packages/kit/src/tracing.ts): left
 * out, it costs a start without export nothing, not even the reading of its code (ADR 0016).
 */
const LEFT_EXTERNAL = ["@electric-sql/pglite", "pdfkit", "pg", "pg-native", "pg-copy-streams", "pino", "@opentelemetry/sdk-trace", "@opentelemetry/resources", "@opentelemetry/exporter-trace-otlp-http"];

const externalDependencies = (keepBundled) => ({
  name: "external-dependencies",
  setup(b) {
    b.onResolve({ filter: /^[^./]/ }, (args) => {
      if (args.path.startsWith("@core/") || args.path.startsWith("node:")) return undefined;
      const name = args.path.startsWith("@") ? args.path.split("/").slice(0, 2).join("/") : args.path.split("/")[0];
      return keepBundled && !LEFT_EXTERNAL.includes(name) ? undefined : { path: args.path, external: true };
    });
  },
});

/**
 * Our sources find files next to themselves with `new URL("../drizzle", import.meta.url)`. In a
 * bundle somewhere else, `import.meta.url` is the bundle's address; this gives each source file its
 * own address again, relative to the bundle, so the bundle still works when the tree is moved.
 */
const ownImportMetaUrl = (outfile) => ({
  name: "own-import-meta-url",
  setup(b) {
    b.onLoad({ filter: /\.tsx?$/ }, async (args) => {
      if (args.path.includes(`${sep}node_modules${sep}`)) return undefined;
      const contents = await readFile(args.path, "utf8");
      if (!contents.includes("import.meta.url")) return undefined;
      const own = relative(dirname(outfile), args.path).split(sep).join("/");
      return { contents: contents.replaceAll("import.meta.url", `new URL(${JSON.stringify(own)}, import.meta.url).href`), loader: extname(args.path).slice(1) };
    });
  },
});

/** Bundled CommonJS dependencies call require() for Node's built-in modules. */
const REQUIRE_BANNER = 'import { createRequire as __coreCreateRequire } from "node:module"; const require = __coreCreateRequire(import.meta.url);';

/**
 * Bundles one TypeScript entry into one ESM file for Node 20. `dependencies: "bundled"` takes npm
 * packages in too (the launcher, services' main.js); the default leaves them external (benchmarks,
 * the OpenAPI script).
 */
export function bundle(entry, outfile, { dependencies = "external" } = {}) {
  const keepBundled = dependencies === "bundled";
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
    plugins: [externalDependencies(keepBundled), ownImportMetaUrl(outfile)],
    ...(keepBundled && { banner: { js: REQUIRE_BANNER } }),
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
  await Promise.all(entries().map((entry) => (entry.cli ? bundleCli() : bundle(entry.in, `${entry.out}.js`, { dependencies: "bundled" }))));
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
