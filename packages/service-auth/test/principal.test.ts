import { describe, expect, it } from "vitest";
import { ApiError } from "@core/kit";
import { activeOrganizationHint, forbiddenFor, holds, isOperator } from "@core/service-auth";
import { principal } from "./support/fake-iam.js";

describe("holds", () => {
  const member = principal({ orgId: "org_a", platformId: "plt_a", permissions: ["platform:read"] });
  const operator = principal({ orgType: "core-operator", orgId: "org_ops", platformId: null, permissions: ["platform:read", "platforms:manage"] });

  it("grants a member's permission inside their own organization and platform", () => {
    expect(holds(member, "platform:read", { platformId: "plt_a" })).toBe(true);
    expect(holds(member, "platform:read", { orgId: "org_a" })).toBe(true);
  });

  it("refuses a member's permission on another platform or organization", () => {
    expect(holds(member, "platform:read", { platformId: "plt_b" })).toBe(false);
    expect(holds(member, "platform:read", { orgId: "org_b" })).toBe(false);
  });

  it("refuses a permission the principal does not hold, even on its own platform", () => {
    expect(holds(member, "platform:write", { platformId: "plt_a" })).toBe(false);
  });

  it("lets operators act platform-wide, but only with the permissions they hold", () => {
    expect(isOperator(operator)).toBe(true);
    expect(holds(operator, "platform:read", { platformId: "plt_any" })).toBe(true);
    expect(holds(operator, "platforms:manage")).toBe(true);
    expect(holds(operator, "billing:operate")).toBe(false);
  });
});

describe("forbiddenFor", () => {
  const heldBack = principal({ orgId: null, orgType: null, platformId: null, platformStatus: null, role: null, permissions: [], restriction: { code: "SSO_REQUIRED", orgId: "org_a", location: "https://iam.example/sign-in/sso?organization=a" } });
  const shape = (error: ApiError) => ({ status: error.status, code: error.code, message: error.message, details: error.details });

  it("names the policy for a principal held back by one, as a principal or as a caller, whatever the route would have said", () => {
    const policy = {
      status: 403,
      code: "FORBIDDEN",
      message: "Your organization requires signing in through its single sign-on provider",
      details: { policy: "SSO_REQUIRED", orgId: "org_a", location: "https://iam.example/sign-in/sso?organization=a" },
    };
    expect(shape(forbiddenFor(heldBack, "You need platform:read"))).toEqual(policy);
    expect(shape(forbiddenFor({ kind: "principal", principal: heldBack }, "Only operators may manage platforms"))).toEqual(policy);
    expect(activeOrganizationHint(heldBack)).toBe(`${policy.message}: ${policy.details.location}`);
  });

  it("gives the route's own message to anyone else: a member, a service, no one", () => {
    const plain = { status: 403, code: "FORBIDDEN", message: "You need platform:write", details: null };
    expect(shape(forbiddenFor(principal(), "You need platform:write"))).toEqual(plain);
    expect(shape(forbiddenFor({ kind: "service", serviceId: "billing" }, "You need platform:write"))).toEqual(plain);
    expect(shape(forbiddenFor(null, "You need platform:write"))).toEqual(plain);
  });
});
