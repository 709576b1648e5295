// The load generator of the benchmarks, run in its own process so it does not share the
// server's event loop: receives one autocannon run over IPC and answers its result.
import autocannon from "autocannon";
import { readFileSync } from "node:fs";

process.once("message", async (run) => {
  const bodies = run.bodiesFile ? readFileSync(run.bodiesFile, "utf8").split("\n").filter(Boolean) : null;
  let next = 0;
  const result = await autocannon({
    url: run.url,
    method: run.method,
    headers: run.headers,
    body: run.body,
    connections: run.connections,
    duration: run.seconds,
    ...(bodies ? { requests: [{ setupRequest: (request) => ({ ...request, body: bodies[next++ % bodies.length] }) }] } : {}),
  });
  process.send({ rate: result.requests.average, total: result.requests.total, p50: result.latency.p50, p99: result.latency.p99, errors: result.errors + result.non2xx }, () => process.exit(0));
});
