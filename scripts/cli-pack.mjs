// `npm pack` of packages/cli: the packed package.json must not carry the repository-only `prepare`
// script (it builds from ../../scripts, which an installed package does not have). prepack builds
// the CLI and writes package.json without its scripts, keeping the original beside it; postpack puts
// the original back. Run from packages/cli by its prepack and postpack scripts.
import { copyFileSync, existsSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { bundleCli } from "./build.mjs";

const [mode] = process.argv.slice(2);
const manifest = "package.json";
const kept = "package.json.repository";

if (mode === "prepack") {
  await bundleCli();
  copyFileSync(manifest, kept);
  const { scripts: _repositoryOnly, ...shipped } = JSON.parse(readFileSync(manifest, "utf8"));
  writeFileSync(manifest, `${JSON.stringify(shipped, null, 2)}\n`);
} else if (mode === "postpack") {
  if (existsSync(kept)) renameSync(kept, manifest);
} else {
  console.error("usage: node scripts/cli-pack.mjs prepack|postpack (from packages/cli)");
  process.exit(2);
}
