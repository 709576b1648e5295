import { testDatabases, type DatabaseHandle } from "@core/storage";
import { call, signUp, startIamAndRegistry, uniqueSlug, type ConfigOverrides, type Iam } from "../../../../services/iam/test/support/harness.js";

/**
 * IAM (with the platform registry) listening on a loopback port, as the real `core` process meets
 * it. The harness drives IAM with a hand-moved clock; here it follows the wall clock, because the
 * CLI waits in real time. `freezeClock()` stops IAM's time, so every poll after the first arrives
 * "too fast" and IAM answers `slow_down`.
 */
export async function startLiveIam(config: ConfigOverrides = {}) {
  const database: DatabaseHandle = await testDatabases()[0]!.open();
  const running = await startIamAndRegistry(database, config);
  const iam = running.iam;
  let frozenAt: Date | null = null;
  iam.clock.now = () => frozenAt ?? new Date();
  return {
    iam,
    iamUrl: running.iamUrl,
    registryUrl: running.registryUrl,
    freezeClock: () => void (frozenAt = new Date()),
    resumeClock: () => void (frozenAt = null),
    close: async () => {
      await running.close();
      await database.close();
    },
  };
}

export type LiveIam = Awaited<ReturnType<typeof startLiveIam>>;

/** A signed-up user who set up an organization, so whoami names a platform and a role. */
export async function userWithPlatform(iam: Iam) {
  const person = await signUp(iam);
  const slug = uniqueSlug("cli");
  const r = await call(iam, "POST", "/api/core/org-setup", { cookie: person.cookie, body: { name: `CLI ${slug}`, slug } });
  if (r.status !== 201) throw new Error(`org-setup refused: ${r.status} ${JSON.stringify(r.body)}`);
  return { ...person, platformId: r.body.platformId as string };
}

/** The user's decision in the browser, through the routes the activation page uses. */
export const approve = (iam: Iam, person: { token: string }, userCode: string) =>
  call(iam, "POST", "/oauth/device/authorize", { token: person.token, body: { user_code: userCode } });
export const deny = (iam: Iam, person: { token: string }, userCode: string) =>
  call(iam, "POST", "/oauth/device/deny", { token: person.token, body: { user_code: userCode } });

/** What IAM says a token stands for, asked directly. */
export const whoamiOf = (iam: Iam, token: string) => call(iam, "POST", "/api/v1/cli/whoami", { token });
