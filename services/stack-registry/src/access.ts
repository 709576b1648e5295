import type { Context } from "hono";
import { forbiddenFor, holds, isOperator, requireCaller, type Caller, type CredentialResolvers } from "@core/service-auth";

/**
 * Who may change the catalogue (issue 4, DESIGN §4): services with service tokens, and operators
 * holding `stacks:publish`. Checking the organization type as well keeps a stray grant to a tenant
 * member from meaning anything. Reading needs any valid credential.
 */
export async function authorizePublisher(c: Context, credentials: CredentialResolvers): Promise<Caller> {
  const caller = await requireCaller(c, credentials);
  if (caller.kind === "service") return caller;
  if (isOperator(caller.principal) && holds(caller.principal, "stacks:publish")) return caller;
  throw forbiddenFor(caller, "Only operators with stacks:publish may change stack templates and versions");
}
