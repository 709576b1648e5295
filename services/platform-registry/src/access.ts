import type { Context } from "hono";
import { forbidden } from "@core/kit";
import { holds, requireCaller, type Caller, type CredentialResolvers } from "@core/service-auth";

/**
 * Who may do what in the platform registry (issue 2): services with service tokens and operators
 * everywhere, members of the owning organization on their own platform per their permissions.
 */
export async function authorizePlatform(
  c: Context,
  credentials: CredentialResolvers,
  platformId: string,
  permission: "platform:read" | "platform:write",
): Promise<Caller> {
  const caller = await requireCaller(c, credentials);
  if (caller.kind === "service") return caller;
  if (!holds(caller.principal, permission, { platformId })) {
    throw forbidden(`You need ${permission} on platform ${platformId}`);
  }
  return caller;
}

/** Platform-wide administration: creating platforms, changing tier or status. */
export async function authorizePlatformAdmin(c: Context, credentials: CredentialResolvers): Promise<Caller> {
  const caller = await requireCaller(c, credentials);
  if (caller.kind === "service") return caller;
  if (!holds(caller.principal, "platforms:manage")) throw forbidden("Only operators may manage platforms");
  return caller;
}

/** Sees every platform: services and operators with platform:read. */
export const seesAllPlatforms = (caller: Caller) =>
  caller.kind === "service" || (caller.principal.orgType === "core-operator" && caller.principal.permissions.includes("platform:read"));
