// How fast the `core` CLI starts (issue 3 "Fast": `core whoami` well under 150 ms). Like hyperfine:
// builds packages/cli/dist/core.js, then spawns each command many times, one after another, and
// prints wall-clock figures beside a bare `node -e 0`, whose start is the floor no CLI goes under.
// Prints figures, never passes or fails.
//
//   node bench/cli-startup.mjs                 (30 runs per command after 3 warm-up runs)
//   BENCH_RUNS=100 node bench/cli-startup.mjs
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { bundleCli, cliEntry } from "../scripts/build.mjs";

const runs = Number(process.env.BENCH_RUNS ?? 30);
const warmup = 3;
const core = `${cliEntry.out}.js`;
await bundleCli();

// whoami needs an IAM: a stub answering at once, so the figure is the CLI's own cost plus one round trip
const identity = JSON.stringify({ email: "ada@example.com", platformId: "plt_bench", role: "owner", expiresAt: new Date(Date.now() + 3_600_000).toISOString() });
const iam = createServer((req, res) => req.resume().on("end", () => res.writeHead(200, { "content-type": "application/json" }).end(identity)));
await new Promise((resolve) => iam.listen(0, "127.0.0.1", resolve));
const iamUrl = `http://127.0.0.1:${iam.address().port}`;

const home = mkdtempSync(join(tmpdir(), "core-bench-"));
writeFileSync(
  join(home, "credentials.json"),
  JSON.stringify({ token: "t", refreshToken: "r", email: "ada@example.com", platformId: "plt_bench", role: "owner", expiresAt: new Date(Date.now() + 3_600_000).toISOString(), iamUrl, audience: "core-cli" }),
  { mode: 0o600 },
);
const env = { ...process.env, CORE_HOME: home, CORE_TOKEN: "" };

/** Wall-clock milliseconds of one spawn, start to exit. */
function once(args) {
  return new Promise((resolve, reject) => {
    const started = process.hrtime.bigint();
    const child = spawn(process.execPath, args, { env, stdio: "ignore" });
    child.once("error", reject);
    child.once("exit", (code) => (code === 0 ? resolve(Number(process.hrtime.bigint() - started) / 1e6) : reject(new Error(`${args.join(" ")} exited ${code}`))));
  });
}

async function measure(title, args) {
  for (let i = 0; i < warmup; i++) await once(args);
  const times = [];
  for (let i = 0; i < runs; i++) times.push(await once(args));
  times.sort((a, b) => a - b);
  const mean = times.reduce((a, b) => a + b, 0) / times.length;
  const sd = Math.sqrt(times.reduce((a, t) => a + (t - mean) ** 2, 0) / times.length);
  const at = (q) => times[Math.min(times.length - 1, Math.floor(q * times.length))];
  const f = (ms) => ms.toFixed(1).padStart(6);
  console.log(`${title.padEnd(40)} mean ${f(mean)} ± ${sd.toFixed(1).padStart(4)} ms   median ${f(at(0.5))}   min ${f(times[0])}   p90 ${f(at(0.9))}   max ${f(times.at(-1))}`);
  return at(0.5);
}

console.log(`${runs} runs each after ${warmup} warm-up runs; Node ${process.versions.node}; ${core}\n`);
const floor = await measure("node -e 0 (the floor)", ["-e", "0"]);
const version = await measure("core --version", [core, "--version"]);
const status = await measure("core status (reads the credential file)", [core, "status"]);
const whoami = await measure("core whoami (one request to a stub IAM)", [core, "whoami"]);
console.log(`\nmedian above the floor: --version +${(version - floor).toFixed(1)} ms, status +${(status - floor).toFixed(1)} ms, whoami +${(whoami - floor).toFixed(1)} ms`);
console.log(`target: core whoami well under 150 ms → median ${whoami.toFixed(1)} ms`);

iam.close();
rmSync(home, { recursive: true, force: true });
