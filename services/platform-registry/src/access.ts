import type { Context } from "hono";
import { activeOrganizationHint, forbiddenFor, holds, isOperator, requireCaller, type Caller, type CredentialResolvers, type Principal } from "@core/service-auth";

/**
 * Operators holding `platforms:manage` administer every platform (DESIGN §4: an operator-only
 * permission, members of `core-operator` act platform-wide), so they also read and write each one.
 * Checking the organization type as well keeps a stray grant to a tenant from meaning anything.
 */
const managesPlatforms = (p: Principal) => isOperator(p) && holds(p, "platforms:manage");

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
  if (caller.kind === "service" || managesPlatforms(caller.principal)) return caller;
  if (!holds(caller.principal, permission, { platformId })) {
    // acting in another organization is the usual reason a person is refused their own platform
    const elsewhere = caller.principal.platformId !== platformId ? ` ${activeOrganizationHint(caller.principal)}` : "";
    throw forbiddenFor(caller, `You need ${permission} on platform ${platformId}.${elsewhere}`);
  }
  return caller;
}

/** Platform-wide administration: creating platforms, changing tier or status. */
export async function authorizePlatformAdmin(c: Context, credentials: CredentialResolvers): Promise<Caller> {
  const caller = await requireCaller(c, credentials);
  if (caller.kind === "service" || managesPlatforms(caller.principal)) return caller;
  throw forbiddenFor(caller, "Only operators may manage platforms");
}

/** Sees every platform: services, and operators with platform:read or platforms:manage. */
export const seesAllPlatforms = (caller: Caller) =>
  caller.kind === "service" || managesPlatforms(caller.principal) || (isOperator(caller.principal) && holds(caller.principal, "platform:read"));
