import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/** A stand-in OpenTelemetry collector: keeps every OTLP/HTTP JSON export posted to /v1/traces. */
export async function startCollector() {
  const exports: { path: string; contentType: string | undefined; body: OtlpExport }[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      exports.push({ path: req.url ?? "", contentType: req.headers["content-type"], body: JSON.parse(Buffer.concat(chunks).toString()) as OtlpExport });
      res.writeHead(200, { "content-type": "application/json" });
      res.end("{}");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    exports,
    /** every span received, with the service.name of its resource */
    spans: () =>
      exports.flatMap(({ body }) =>
        body.resourceSpans.flatMap((resourceSpans) => {
          const service = resourceSpans.resource.attributes.find((a) => a.key === "service.name")?.value.stringValue;
          return resourceSpans.scopeSpans.flatMap((scope) => scope.spans.map((span) => ({ ...span, service })));
        }),
      ),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

export interface OtlpAttribute {
  key: string;
  value: { stringValue?: string; intValue?: number | string };
}
export interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes: OtlpAttribute[];
}
export interface OtlpExport {
  resourceSpans: { resource: { attributes: OtlpAttribute[] }; scopeSpans: { spans: OtlpSpan[] }[] }[];
}
