// `npm start`: builds when a source is newer than the bundles, then runs the launcher.
import { readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { buildAll, entries, root } from "./build.mjs";

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
  for (const entry of entries()) {
    try {
      oldestBundle = Math.min(oldestBundle, statSync(`${entry.out}.js`).mtimeMs);
    } catch {
      return true;
    }
  }
  const sources = ["packages", "services"].flatMap((top) =>
    readdirSync(join(root, top)).map((name) => join(root, top, name, "src")),
  );
  return sources.some((dir) => {
    try {
      return newest(dir) > oldestBundle;
    } catch {
      return false;
    }
  });
}

if (needsBuild()) {
  const ms = await buildAll();
  console.log(`core: built in ${ms} ms`);
}
await import(join(root, "packages/launcher/dist/start.js"));
