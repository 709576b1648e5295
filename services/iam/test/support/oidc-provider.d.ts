/** The part of `oidc-provider` (9.x, ships no types) the SSO tests use. */
declare module "oidc-provider" {
  import type { IncomingMessage, ServerResponse } from "node:http";

  interface AccountClaims {
    sub: string;
    [claim: string]: unknown;
  }

  export default class Provider {
    constructor(issuer: string, configuration: Record<string, unknown> & { findAccount?: (ctx: unknown, id: string) => Promise<{ accountId: string; claims: () => Promise<AccountClaims> } | undefined> });
    callback(): (req: IncomingMessage, res: ServerResponse) => void;
  }
}
