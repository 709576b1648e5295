import { parseArgs } from "node:util";
import { resolve } from "node:path";
import { ConfigError, type ServiceName } from "@core/kit";
import { runUntilStopped, type ServiceModule } from "./run.js";
import { MAX_REPLICAS, superviseReplicas, type ReadyMessage } from "./replicas.js";

/**
 * `npm start`: every service that exists, in one process, each on its own port (DESIGN §1);
 * `npm start -- --only <name>` runs one; `--migrate-only` applies migrations and exits. The launcher
 * is the one place that imports the services, so one bundle holds them all; each is imported when
 * needed, so the database begins to open before their code runs (ADR 0016). `tables` must agree
 * with the module's `migrationsFolder` (the launcher checks).
 */
const MODULES: Record<ServiceName, { tables: boolean; load: () => Promise<ServiceModule> }> = {
  iam: { tables: true, load: () => import("../../../services/iam/src/index.js") },
  billing: { tables: true, load: () => import("../../../services/billing/src/index.js") },
  "stack-registry": { tables: true, load: () => import("../../../services/stack-registry/src/index.js") },
  "platform-registry": { tables: true, load: () => import("../../../services/platform-registry/src/index.js") },
  vault: { tables: false, load: () => import("../../../services/vault/src/index.js") },
};
const AVAILABLE = Object.keys(MODULES) as ServiceName[];

const USAGE = `usage: npm start -- [--only <${AVAILABLE.join("|")}>] [--replicas <1-${MAX_REPLICAS}>] [--migrate-only] [--help]`;

/** A command line this launcher does not take: what is wrong, the usage line, exit code 2 (DESIGN §10). */
function refuseUsage(problem: string): never {
  console.error(`core: ${problem}\n${USAGE}`);
  process.exit(2);
}

const values = (() => {
  try {
    return parseArgs({
      options: { only: { type: "string" }, "migrate-only": { type: "boolean" }, replicas: { type: "string" }, help: { type: "boolean", short: "h" } },
      strict: true,
    }).values;
  } catch (err) {
    // node:util's message, without its advice on positional arguments: "Unknown option '--bogus'"
    return refuseUsage((err as Error).message.split(". ")[0]!);
  }
})();

if (values.help) {
  console.log(USAGE);
  process.exit(0);
}
if (values.only && !AVAILABLE.includes(values.only as ServiceName)) refuseUsage(`unknown service "${values.only}"; choose one of ${AVAILABLE.join(", ")}`);
const names = values.only ? [values.only as ServiceName] : AVAILABLE;
if (values.replicas !== undefined) await runReplicas(values.replicas);
const running = await runUntilStopped({
  services: {
    withTables: names.some((name) => MODULES[name].tables),
    load: () => Promise.all(names.map(async (name): Promise<[ServiceName, ServiceModule]> => [name, await MODULES[name].load()])),
  },
  migrateOnly: values["migrate-only"],
  builtInCredentials: !values.only || !process.env.DATABASE_URL,
});
if (running && values["migrate-only"]) {
  console.log(`core: migrations applied for ${names.join(", ")}`);
  await running.stop();
  process.exit(0);
}
process.send?.({ type: "core:ready", urls: running?.listening ?? {} } satisfies ReadyMessage);
// a replica's supervisor prints the addresses of all of them
if (running && !process.env.CORE_REPLICA) {
  const width = Math.max(...Object.keys(running.urls).map((n) => n.length));
  console.log("core is running:");
  for (const [name, url] of Object.entries(running.urls)) console.log(`  ${name.padEnd(width)}  ${url}`);
  console.log(`data: ${process.env.DATABASE_URL ? "PostgreSQL (DATABASE_URL)" : resolve(process.env.CORE_DATA_DIR || "./.data")}`);
  if (running.urls.iam) console.log(`sign up or in at ${running.urls.iam}/sign-in; log the CLI in with: npx core login`);
  console.log("stop with Ctrl-C");
}

/** `--replicas N`: this process supervises N replicas and never returns. */
async function runReplicas(raw: string): Promise<never> {
  const count = /^[0-9]{1,2}$/.test(raw) ? Number(raw) : NaN;
  if (!(count >= 1 && count <= MAX_REPLICAS)) refuseUsage(`--replicas takes a number from 1 to ${MAX_REPLICAS}, got "${raw}"`);
  if (values["migrate-only"]) refuseUsage("--replicas and --migrate-only do not go together: migrations are applied once, by whichever replica starts first");
  if (!process.env.DATABASE_URL) {
    console.error("core: --replicas needs PostgreSQL (set DATABASE_URL): the embedded database belongs to one process");
    process.exit(1);
  }
  const args = process.argv.slice(2).filter((arg, i, all) => !arg.startsWith("--replicas") && all[i - 1] !== "--replicas");
  let replicas: Awaited<ReturnType<typeof superviseReplicas>>;
  try {
    replicas = await superviseReplicas({ replicas: count, services: names, args });
  } catch (err) {
    // a replica that failed said why itself; a port beyond 65535 is said here
    if (err instanceof ConfigError) console.error(`core: ${err.message}`);
    process.exit(1);
  }
  console.log(`core is running ${count} replica${count === 1 ? "" : "s"}:`);
  const width = Math.max(...names.map((n) => n.length));
  for (const name of names) console.log(`  ${name.padEnd(width)}  ${replicas.urls.map((urls) => urls[name]).join("  ")}`);
  console.log("data: PostgreSQL (DATABASE_URL)");
  console.log("stop with Ctrl-C");
  process.once("SIGINT", () => void replicas.stop());
  process.once("SIGTERM", () => void replicas.stop());
  process.exit(await replicas.stopped);
}
