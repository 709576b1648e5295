import type { Context, Outcome } from "../context.js";
import { readCredential, withCredentialLock, writeCredential } from "../credentials.js";
import { CliFailure, failures, policyHoldOf, policyStep } from "../failures.js";
import { table } from "../format.js";
import { isApiKey, Unreachable, type Refusal, type Reply } from "../http.js";
import { identityOf } from "./whoami.js";
import { usableToken, type UsableToken } from "./token.js";

/** One organization of the person, as IAM's `GET /api/core/memberships` answers it. */
export interface Membership {
  orgId: string;
  name: string;
  slug: string;
  orgType: "core-operator" | "tenant";
  platformId: string | null;
  role: string | null;
  active: boolean;
  joinedAt: number;
}

/**
 * `core org list` and `core org switch <slug>`: a person in several organizations acts in one at a
 * time (DESIGN §4). Switching sets the login's session to the chosen organization at IAM
 * (`/api/auth/organization/set-active`); IAM keeps the choice across the login's refreshes, and the
 * stored login's platform and role follow it.
 */
export const org = {
  async list(ctx: Context): Promise<Outcome> {
    const login = await usableToken(ctx);
    const data = await membershipsOf(ctx, login);
    const text =
      data.length === 0
        ? noOrganization(login.iamUrl)
        : `${table(
            ["", "SLUG", "NAME", "ROLE", "PLATFORM"],
            data.map((m) => [m.active ? "*" : "", m.slug, m.name, m.role ?? "-", m.orgType === "core-operator" ? "(operators)" : (m.platformId ?? "-")]),
          )}\n* the organization ${isApiKey(login.token) ? "this API key" : "this login"} acts in; change it with: core org switch <slug>`;
    return { text, json: { data } };
  },

  async switch(ctx: Context, slug: string): Promise<Outcome> {
    const login = await usableToken(ctx);
    if (isApiKey(login.token)) {
      throw new CliFailure(
        "API_KEY_ORGANIZATION",
        "An API key acts in the organization it was made in, so it cannot switch. Make a key in the other organization, or log in with core login and switch.",
      );
    }
    const memberships = await membershipsOf(ctx, login);
    const chosen = memberships.find((m) => m.slug === slug);
    if (!chosen) {
      const yours = memberships.map((m) => m.slug).join(", ");
      throw new CliFailure("NOT_A_MEMBER", `You are not a member of an organization "${slug}". ${yours ? `Yours: ${yours} (core org list).` : noOrganization(login.iamUrl)}`);
    }
    if (!chosen.active) {
      const reply = await ask<unknown>(ctx, login, "POST", "/api/auth/organization/set-active", { organizationSlug: slug });
      if ("refused" in reply) throw refusedBy(login.iamUrl, "Switching the organization", reply.refused);
    }
    // the stored login names the platform and role it acts with: they follow the switch
    const identity = await identityOf(ctx, login.iamUrl, login.token, login.source === "env" ? "the token in CORE_TOKEN" : "the stored token");
    if (login.source === "file") {
      await withCredentialLock(
        ctx.settings.credentialsPath,
        async () => {
          const stored = await readCredential(ctx.settings.credentialsPath);
          if (stored && stored.token === login.token) await writeCredential(ctx.settings.credentialsPath, { ...stored, platformId: identity.platformId || null, role: identity.role });
        },
        ctx.sleep,
      );
    }
    const where = chosen.orgType === "core-operator" ? "the operators' organization" : chosen.platformId ? `platform ${chosen.platformId}` : "no platform yet";
    const text = `${chosen.active ? "Already acting in" : "Now acting in"} ${chosen.name} (${chosen.slug}): ${where}, role ${chosen.role ?? "none"}.`;
    return { text, json: { ...chosen, active: true, switched: !chosen.active } };
  },
};

/** The message for a person in no organization: where to make one. */
const noOrganization = (iamUrl: string) => `You are in no organization yet: set one up at ${iamUrl}/onboarding, or accept an invitation.`;

async function membershipsOf(ctx: Context, login: UsableToken): Promise<Membership[]> {
  const reply = await ask<{ data: Membership[] }>(ctx, login, "GET", "/api/core/memberships", undefined);
  if ("refused" in reply) throw refusedBy(login.iamUrl, "Listing your organizations", reply.refused);
  if (!Array.isArray(reply.ok.data)) throw failures.unexpectedAnswer(login.iamUrl, "the memberships", 200, "no data");
  return reply.ok.data;
}

async function ask<T>(ctx: Context, login: UsableToken, method: string, path: string, body: unknown): Promise<Reply<T>> {
  try {
    return await ctx.iam(login.iamUrl).json<T>(method, path, body, login.token);
  } catch (err) {
    if (err instanceof Unreachable) throw failures.iamUnreachable(login.iamUrl, err.reason);
    throw err;
  }
}

/** IAM's refusal with its own code, status and request id, and what to do: log in again, or what the organization's policy asks. */
function refusedBy(iamUrl: string, what: string, refused: Refusal): CliFailure {
  const hold = policyHoldOf(refused.details, iamUrl);
  const hint = hold ? `\n${policyStep(hold)}` : refused.status === 401 ? " Run: core login" : "";
  return new CliFailure(refused.code, `${what} failed: IAM at ${iamUrl} answered ${refused.status} ${refused.code}${refused.message ? `: ${refused.message}` : ""}.${hint}`, {
    status: refused.status,
    requestId: refused.requestId,
    ...(hold ? { details: hold } : {}),
  });
}
