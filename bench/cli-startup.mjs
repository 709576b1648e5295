// How fast the `core` CLI starts (issue 3 "Fast": `core whoami` well under 150 ms). Like hyperfine:
// builds packages/cli/dist/core.js, then spawns each command many times, one after another, and
// prints wall-clock figures beside a bare `node -e 0`, whose start is the floor no CLI goes under.
// The commands take turns, round by round, so other work on the machine weighs on all of them alike.
// Prints figures, never passes or fails.
//
//   node bench/cli-startup.mjs                 (30 rounds after 3 warm-up rounds)
//   BENCH_RUNS=100 node bench/cli-startup.mjs
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { availableParallelism, loadavg, tmpdir } from "node:os";
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

/** Wall-clock figures of each case; the cases take turns, so a change in machine load hits them alike. */
async function measure(cases) {
  const times = cases.map(() => []);
  for (let round = 0; round < warmup + runs; round++) {
    for (const [i, [, args]] of cases.entries()) {
      const ms = await once(args);
      if (round >= warmup) times[i].push(ms);
    }
  }
  return times.map((list) => list.sort((a, b) => a - b));
}

function report(title, times) {
  const mean = times.reduce((a, b) => a + b, 0) / times.length;
  const sd = Math.sqrt(times.reduce((a, t) => a + (t - mean) ** 2, 0) / times.length);
  const at = (q) => times[Math.min(times.length - 1, Math.floor(q * times.length))];
  const f = (ms) => ms.toFixed(1).padStart(6);
  console.log(`${title.padEnd(40)} mean ${f(mean)} ± ${sd.toFixed(1).padStart(4)} ms   median ${f(at(0.5))}   min ${f(times[0])}   p90 ${f(at(0.9))}   max ${f(times.at(-1))}`);
  return { median: at(0.5), min: times[0] };
}

const cases = [
  ["node -e 0 (the floor)", ["-e", "0"]],
  ["core --version", [core, "--version"]],
  ["core status (reads the credential file)", [core, "status"]],
  ["core whoami (one request to a stub IAM)", [core, "whoami"]],
];
console.log(`${runs} rounds after ${warmup} warm-up rounds; Node ${process.versions.node}; load average ${loadavg()[0].toFixed(2)} on ${availableParallelism()} cores; ${core}\n`);
const [floor, ...commands] = (await measure(cases)).map((times, i) => report(cases[i][0], times));
const above = (key) => commands.map((c, i) => `${cases[i + 1][0].split(" (")[0]} +${(c[key] - floor[key]).toFixed(1)} ms`).join(", ");
// on a busy machine the minimum is the steadier estimate of what the CLI itself costs
console.log(`\nabove the floor, by median: ${above("median")}`);
console.log(`above the floor, by minimum: ${above("min")}`);
console.log(`target: core whoami well under 150 ms → median ${commands[2].median.toFixed(1)} ms, minimum ${commands[2].min.toFixed(1)} ms`);

iam.close();
rmSync(home, { recursive: true, force: true });
