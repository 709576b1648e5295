// The load generator of bench/metering.ts, in its own process so building batches never shares the
// server's event loop: autocannon sends POST /usage/events, each request a new batch of `size`
// events of which `duplicates` repeat events sent `lag` batches earlier, byte for byte (a client's
// retry). Receives one run over IPC and answers its figures and the ids it sent.
import autocannon from "autocannon";

const METERS = ["api_requests", "compute_minutes", "storage_gb_hours"];

process.once("message", async (run) => {
  const { url, headers, platformIds, seconds, connections, size, duplicates, lag, timestamp, idPrefix } = run;
  // event n is always the same content, so sending it twice is a duplicate, never ID_REUSED
  const event = (n, id = `${idPrefix}${n}`) =>
    `{"id":"${id}","platformId":"${platformIds[n % platformIds.length]}","tenantId":"t${n % 50}","stackId":"s${n % 4}",` +
    `"meter":"${METERS[n % 3]}","quantity":"${(n % 997) + 1}.${String(n % 1000).padStart(3, "0")}","timestamp":${timestamp - (n % 3000)}}`;
  const fresh = size - duplicates;
  let batch = 0;
  const answers = { accepted: 0, duplicates: 0, rejected: 0 };
  const body = () => {
    const b = batch++;
    const parts = [];
    for (let i = 0; i < fresh; i++) parts.push(event(b * fresh + i));
    // repeats of an earlier batch's events; the first `lag` batches have none to repeat and send as
    // many new events of their own instead (ids apart from the others)
    const from = b - lag;
    for (let i = 0; i < duplicates; i++) parts.push(from >= 0 ? event(from * fresh + ((i * 7) % fresh)) : event(b * duplicates + i, `${idPrefix}first-${b * duplicates + i}`));
    return `{"events":[${parts.join(",")}]}`;
  };
  const result = await autocannon({
    url,
    method: "POST",
    headers: { ...headers, "content-type": "application/json" },
    connections,
    duration: seconds,
    timeout: 30,
    requests: [
      {
        setupRequest: (request) => ({ ...request, body: body() }),
        // what billing answered each event, summed: the run is only a measure if none was rejected
        onResponse: (status, text) => {
          if (status !== 200) return;
          const answer = JSON.parse(text);
          answers.accepted += answer.accepted;
          answers.duplicates += answer.duplicates;
          answers.rejected += answer.rejected;
        },
      },
    ],
  });
  process.send(
    {
      requests: result.requests.total,
      batches: batch,
      rate: result.requests.average,
      p50: result.latency.p50,
      p99: result.latency.p99,
      max: result.latency.max,
      errors: result.errors + result.non2xx + result.timeouts,
      seconds: result.duration,
      ...answers,
    },
    () => process.exit(0),
  );
});
