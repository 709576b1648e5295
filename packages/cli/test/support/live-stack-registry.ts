import { createServer, request } from "node:http";
import type { AddressInfo } from "node:net";
import { listen, silentLogger, type RunningServer } from "@core/kit";
import { remoteResolvers, ServiceTokenClient } from "@core/service-auth";
import { applyMigrations, testDatabases, type DatabaseHandle } from "@core/storage";
import { createApp as createStackRegistryApp } from "../../../../services/stack-registry/src/app.js";
import { migrationsFolder as stackRegistryMigrations, SERVICE_ID } from "../../../../services/stack-registry/src/index.js";
import { createApiKey, createIam, freePort, operator, REGISTRY_SECRET, signUp } from "../../../../services/iam/test/support/harness.js";

const STACK_REGISTRY_SECRET = "stack-registry-secret-for-cli-tests-0123456789";

/**
 * The real stack registry listening on loopback, checking credentials with a real IAM over HTTP
 * (its service token, remote resolvers), as in `npm start`. IAM follows the wall clock, because
 * the CLI runs in real time. `publisherToken` is a bootstrapped operator's session (stacks:publish);
 * `readerToken` a signed-up user's, which may read but not write.
 */
export async function startLiveStackRegistry() {
  const database: DatabaseHandle = await testDatabases()[0]!.open();
  const [iamPort, registryPort] = [await freePort(), await freePort()];
  const iamUrl = `http://127.0.0.1:${iamPort}`;
  const url = `http://127.0.0.1:${registryPort}`;
  const iam = await createIam(database, {
    config: { iamUrl, trustedOrigins: [iamUrl] },
    serviceCredentials: new Map([
      ["platform-registry", REGISTRY_SECRET],
      [SERVICE_ID, STACK_REGISTRY_SECRET],
    ]),
  });
  iam.clock.now = () => new Date();
  await applyMigrations(database.db, SERVICE_ID, stackRegistryMigrations);
  const tokens = new ServiceTokenClient(iamUrl, { serviceId: SERVICE_ID, secret: STACK_REGISTRY_SECRET });
  const app = createStackRegistryApp({ db: database.db, logger: silentLogger(), credentials: remoteResolvers({ iamUrl, serviceId: SERVICE_ID, tokens }) });
  const servers: RunningServer[] = [await listen(iam.app, iamPort, "127.0.0.1"), await listen(app, registryPort, "127.0.0.1")];

  const publisher = await operator(iam);
  const reader = await signUp(iam);
  // what a CI job would hold: an API key of the operator (better-auth's route, the owner's session)
  const publisherKey = await createApiKey(iam, publisher);
  const proxy = await recordingProxy(url);

  return {
    /** the address the CLI is given: the recording proxy in front of the registry */
    url: proxy.url,
    requests: proxy.requests,
    iam,
    iamUrl,
    publisherToken: publisher.token,
    readerToken: reader.token,
    /** an API key of the operator, sent as x-api-key */
    publisherApiKey: publisherKey.key,
    /** POST /api/v1/stacks as the operator: the CLI publishes versions, templates are made through the API */
    async createTemplate(name: string, fields: Partial<{ displayName: string; description: string; domain: string; icon: string }> = {}) {
      const body = { name, displayName: fields.displayName ?? `The ${name} stack`, description: fields.description ?? "What it is for", ...fields };
      const res = await fetch(`${url}/api/v1/stacks`, {
        method: "POST",
        headers: { authorization: `Bearer ${publisher.token}`, "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      if (res.status !== 201) throw new Error(`creating ${name} answered ${res.status}: ${await res.text()}`);
    },
    close: async () => {
      await proxy.close();
      for (const server of servers) await server.close();
      await database.close();
    },
  };
}

export interface RecordedRequest {
  method: string;
  path: string;
  /** the query parameters, when there are any */
  query?: Record<string, string>;
  authorization: string | undefined;
  apiKey?: string | undefined;
  /** the Idempotency-Key header, when one was sent */
  idempotencyKey?: string;
  body: any;
}

/** Passes every request on to `target` unchanged and keeps what the CLI sent, for the tests to look at. */
export async function recordingProxy(target: string) {
  const requests: RecordedRequest[] = [];
  const server = createServer((incoming, outgoing) => {
    const chunks: Buffer[] = [];
    incoming.on("data", (chunk: Buffer) => chunks.push(chunk));
    incoming.on("end", () => {
      const body = Buffer.concat(chunks);
      const { pathname: path, search } = new URL(incoming.url!, "http://x");
      const apiKey = incoming.headers["x-api-key"];
      requests.push({
        method: incoming.method!,
        path,
        ...(search ? { query: Object.fromEntries(new URLSearchParams(search)) } : {}),
        authorization: incoming.headers.authorization,
        ...(typeof apiKey === "string" ? { apiKey } : {}),
        ...(typeof incoming.headers["idempotency-key"] === "string" ? { idempotencyKey: incoming.headers["idempotency-key"] } : {}),
        body: body.length ? JSON.parse(body.toString("utf8")) : undefined,
      });
      const forwarded = request(`${target}${incoming.url}`, { method: incoming.method, headers: incoming.headers }, (answer) => {
        outgoing.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(outgoing);
      });
      forwarded.on("error", () => outgoing.writeHead(502).end());
      forwarded.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
