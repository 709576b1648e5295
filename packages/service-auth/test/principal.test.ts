import { describe, expect, it } from "vitest";
import { holds, isOperator } from "@core/service-auth";
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
