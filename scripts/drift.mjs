// CI drift checks (spec §9, DESIGN §2-3): the committed OpenAPI descriptions and Drizzle
// migrations must match what the code generates.
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { root } from "./build.mjs";

let failed = false;
for (const name of readdirSync(join(root, "services"))) {
  const config = join("services", name, "drizzle.config.ts");
  if (!existsSync(join(root, config))) continue;
  const run = spawnSync("npx", ["drizzle-kit", "generate", "--config", config], { cwd: root, encoding: "utf8" });
  const output = `${run.stdout}\n${run.stderr}`;
  if (run.status !== 0 || !output.includes("No schema changes")) {
    failed = true;
    console.error(`${name}: the Drizzle schema and the committed migrations differ. Run: npx drizzle-kit generate --config ${config}`);
    console.error(output.split("\n").filter((l) => l && !l.includes("nodedir")).slice(-10).join("\n"));
    // leave the tree as it was
    execFileSync("git", ["checkout", "--", join("services", name, "drizzle")], { cwd: root });
    execFileSync("git", ["clean", "-fdq", "--", join("services", name, "drizzle")], { cwd: root });
  } else {
    console.log(`${name}: migrations match the schema`);
  }
}
const openapi = spawnSync("node", [join(root, "scripts/openapi.mjs"), "--check"], { cwd: root, stdio: "inherit" });
if (openapi.status !== 0) failed = true;
process.exit(failed ? 1 : 0);
