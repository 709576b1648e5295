import { ConfigError, probe, trustedProxyHops, type HealthCheck, type ServiceContext } from "@core/kit";
import type { CredentialResolvers } from "./credentials.js";
import type { RemoteJWKSet } from "jose";
import { iamKeySet, keysKnown, remoteResolvers } from "./remote.js";
import { ServiceTokenClient, type ServiceTokenSource } from "./service-token-client.js";

/**
 * What every resource service needs from IAM, built from the launcher's context (DESIGN §1, §4):
 * credential resolution with its own service token, health checks of its database and of IAM, the
 * readiness check of IAM's keys, the key set itself (for access tokens the service verifies), and the
 * token source for its own calls to other services.
 */
export function iamBackedDeps(
  ctx: ServiceContext,
  serviceId: string,
): { credentials: CredentialResolvers; healthChecks: HealthCheck[]; readinessChecks: HealthCheck[]; tokens: ServiceTokenSource; keys: RemoteJWKSet } {
  const iamUrl = ctx.common.url("iam");
  const secret = ctx.serviceCredentials.get(serviceId);
  if (!secret) {
    // with DATABASE_URL nothing is generated into a data dir: each process is given its credential
    throw new ConfigError(`No service credential for ${serviceId}: set CORE_SERVICE_CREDENTIALS to include ${serviceId}:<secret> (the same list IAM has)`);
  }
  // the client address sent with API key checks (clientIpOf): a wrong CORE_TRUST_PROXY stops start-up
  trustedProxyHops();
  const tokens = new ServiceTokenClient(iamUrl, { serviceId, secret });
  const keys = iamKeySet(iamUrl, serviceId);
  return {
    tokens,
    keys,
    credentials: remoteResolvers({ iamUrl, serviceId, tokens, keys }),
    healthChecks: [
      { name: "database", check: ctx.pingDatabase },
      { name: "iam", check: () => probe(`${iamUrl}/api/auth/jwks`) },
    ],
    // DESIGN §10: ready once IAM's keys are known; an IAM that goes away later leaves them known
    readinessChecks: [{ name: "iam-keys", check: () => keysKnown(keys) }],
  };
}
