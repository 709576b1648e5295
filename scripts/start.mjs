// `npm start`: rebuilds the launcher and the CLI when a source is newer than their bundles, then
// runs the launcher. (`npm ci` built both already; services' production bundles are `npm run build`.)
// esbuild is loaded only when something has to be built: most starts need none of it.
import module from "node:module";
import { readdirSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const bundles = ["packages/launcher/dist/start.js", "packages/cli/dist/core.js"].map((path) => join(root, path));

function newest(dir) {
  let latest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    latest = Math.max(latest, entry.isDirectory() ? newest(path) : statSync(path).mtimeMs);
  }
  return latest;
}

function needsBuild() {
  let oldestBundle = Infinity;
  for (const bundle of bundles) {
    try {
      oldestBundle = Math.min(oldestBundle, statSync(bundle).mtimeMs);
    } catch {
      return true;
    }
  }
  const sources = ["packages", "services"].flatMap((top) => readdirSync(join(root, top)).map((name) => join(root, top, name, "src")));
  return sources.some((dir) => {
    try {
      return newest(dir) > oldestBundle;
    } catch {
      return false;
    }
  });
}

// a replica (CORE_REPLICA, set by its supervisor) runs what its supervisor built: one started again
// never rebuilds sources changed since, nor runs other code than its siblings
if (!process.env.CORE_REPLICA && needsBuild()) {
  const started = Date.now();
  const { bundle, bundleCli, launcherEntry } = await import("./build.mjs");
  await Promise.all([bundle(launcherEntry.in, `${launcherEntry.out}.js`, { dependencies: "bundled" }), bundleCli()]);
  console.log(`core: built in ${Date.now() - started} ms`);
}
// Node 22.1 and later keep the compiled launcher on disk between starts (Node 20 has no such cache)
module.enableCompileCache?.(join(root, "node_modules/.cache/core/compile"));
await import(join(root, "packages/launcher/dist/start.js"));
