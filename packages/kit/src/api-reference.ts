import { html, raw } from "hono/html";

interface Operation {
  summary?: string;
  description?: string;
  tags?: string[];
  parameters?: { name: string; in: string; required?: boolean; schema?: unknown }[];
  requestBody?: { content?: Record<string, { schema?: unknown }> };
  responses?: Record<string, { description?: string }>;
}

interface Document {
  info: { title: string; version: string; description?: string };
  paths?: Record<string, Record<string, Operation>>;
}

const METHODS = ["get", "post", "put", "patch", "delete"];

/**
 * `GET /docs`: a readable API reference built from the service's own OpenAPI document, served
 * without any script or network fetch so it works on an air-gapped machine.
 */
export function renderApiReference(doc: Document) {
  const operations = Object.entries(doc.paths ?? {}).flatMap(([path, item]) =>
    METHODS.filter((m) => item[m]).map((m) => ({ path, method: m, op: item[m]! })),
  );
  return html`<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <title>${doc.info.title} — API reference</title>
    <style>
      body { font: 15px/1.5 system-ui, sans-serif; max-width: 60rem; margin: 2rem auto; padding: 0 1rem; color: #1b1f24; }
      h1 { margin-bottom: 0; } .op { border: 1px solid #d0d7de; border-radius: 6px; margin: 1rem 0; padding: .75rem 1rem; }
      .m { font: 600 13px ui-monospace, monospace; text-transform: uppercase; padding: 2px 6px; border-radius: 4px; background: #ddf4ff; }
      code, pre { font: 13px ui-monospace, monospace; } pre { background: #f6f8fa; padding: .5rem; overflow: auto; }
      summary { cursor: pointer; }
    </style>
  </head>
  <body>
    <h1>${doc.info.title}</h1>
    <p>Version ${doc.info.version}. Machine-readable description: <a href="/openapi.json">/openapi.json</a>.</p>
    ${doc.info.description ? html`<p>${doc.info.description}</p>` : ""}
    ${operations.map(
      ({ path, method, op }) => html`<section class="op" id="${method}-${path}">
        <h2><span class="m">${method}</span> <code>${path}</code></h2>
        ${op.summary ? html`<p>${op.summary}</p>` : ""}
        ${op.description ? html`<p>${op.description}</p>` : ""}
        ${op.parameters?.length
          ? html`<p>Parameters: ${raw(
              op.parameters
                .map((p) => `<code>${escape(p.name)}</code> (${escape(p.in)}${p.required ? ", required" : ""})`)
                .join(", "),
            )}</p>`
          : ""}
        ${op.requestBody?.content?.["application/json"]?.schema
          ? html`<details><summary>Request body</summary><pre>${JSON.stringify(op.requestBody.content["application/json"].schema, null, 2)}</pre></details>`
          : ""}
        <p>Responses: ${Object.entries(op.responses ?? {})
          .map(([status, r]) => `${status} ${r.description ?? ""}`)
          .join("; ")}</p>
      </section>`,
    )}
  </body>
</html>`;
}

function escape(text: string): string {
  return text.replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);
}
