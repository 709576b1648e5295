import { callService, type Reply } from "./http.js";

/** A stack template as the list and the detail return it (spec §2.8); timestamps are Unix seconds. */
export interface StackTemplate {
  id: string;
  name: string;
  display_name: string;
  description: string;
  icon: string;
  domain: string;
  latest_version: string;
  status: string;
  created_at: number;
  updated_at: number;
}

/** A published version (spec §2.9); `stack_definition` is a JSON string. */
export interface StackVersion {
  id: string;
  template_id: string;
  version: string;
  stack_definition: string;
  core_sdk_version: string;
  status: string;
  published_at: number;
  created_at: number;
}

/** The stack registry routes the CLI calls (spec §4.5), at one base address. Throws `Unreachable`. */
export class StackRegistryClient {
  constructor(
    readonly baseUrl: string,
    private readonly options: { token: string; userAgent: string; debug: (line: string) => void },
  ) {}

  list(): Promise<Reply<{ data: StackTemplate[]; total: number }>> {
    return this.call("GET", "/api/v1/stacks", undefined, 200);
  }

  show(name: string): Promise<Reply<{ template: StackTemplate; latestVersion: StackVersion | string | null }>> {
    return this.call("GET", `/api/v1/stacks/${encodeURIComponent(name)}`, undefined, 200);
  }

  create(body: { name: string; displayName: string; description: string; icon?: string; domain?: string }): Promise<Reply<{ id: string }>> {
    return this.call("POST", "/api/v1/stacks", body, 201);
  }

  /** PATCH: only the fields given change; `status: "active"` reactivates a deprecated template. */
  update(name: string, changes: { displayName?: string; description?: string; icon?: string; status?: "active" }): Promise<Reply<{ ok: true }>> {
    return this.call("PATCH", `/api/v1/stacks/${encodeURIComponent(name)}`, changes, 200);
  }

  version(name: string, version: string): Promise<Reply<StackVersion>> {
    return this.call("GET", `/api/v1/stacks/${encodeURIComponent(name)}/${encodeURIComponent(version)}`, undefined, 200);
  }

  versions(name: string): Promise<Reply<{ data: StackVersion[]; total: number }>> {
    return this.call("GET", `/api/v1/stacks/${encodeURIComponent(name)}/versions`, undefined, 200);
  }

  publish(name: string, body: { version: string; stackDefinition: Record<string, unknown>; coreSdkVersion: string }): Promise<Reply<{ id: string }>> {
    return this.call("POST", `/api/v1/stacks/${encodeURIComponent(name)}/versions`, body, 201);
  }

  deprecateTemplate(name: string): Promise<Reply<{ ok: true }>> {
    return this.call("PATCH", `/api/v1/stacks/${encodeURIComponent(name)}`, { status: "deprecated" }, 200);
  }

  deprecateVersion(name: string, version: string): Promise<Reply<{ ok: true }>> {
    return this.call("DELETE", `/api/v1/stacks/${encodeURIComponent(name)}/${encodeURIComponent(version)}`, undefined, 200);
  }

  private call<T>(method: string, path: string, body: unknown, expected: number): Promise<Reply<T>> {
    return callService(method, `${this.baseUrl}${path}`, body, expected, { credential: this.options.token, userAgent: this.options.userAgent, debug: this.options.debug });
  }
}
