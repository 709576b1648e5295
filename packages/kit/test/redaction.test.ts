import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { isSecretName, loggablePath, loggableUrl, redactText, SecretRoutes } from "@core/kit";

const random = () => randomBytes(32).toString("base64url");

describe("credentials by their shape", () => {
  it("finds the prefixes the system mints secrets with, JWTs and long random runs, wherever they stand in a text", () => {
    const secrets = [
      `core_${"QxZ".repeat(21)}`,
      `bps_${random()}`,
      `whsec_${random()}`,
      `seti_k3v9x0a1b2c3d4e5f6g7_secret_${randomBytes(16).toString("hex")}`,
      `sk_test_${random()}`,
      "eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJpYW0ifQ.c2lnbmF0dXJl",
      random(),
      randomBytes(24).toString("hex"),
    ];
    for (const secret of secrets) {
      expect(redactText(`before ${secret} after`), secret.slice(0, 8)).toBe("before [redacted] after");
      expect(redactText(`(${secret})`)).toBe("([redacted])");
    }
  });

  it("leaves what only looks long: ids, slugs, words, time stamps, numbers, trace ids", () => {
    const kept = [
      "plt_k3v9x0a1b2c3d4e5f6g7",
      "YP7Gk4rm5W0C0epuqWKqQlyj2mLbFGIk",
      "my-company-production-platform-2024-eu-west-1",
      "/tmp/core/outbox/2026-12-02T01-15-35-768Z-operator-mx5fpcvm-1@example.com.txt",
      "getOrganizationMembersWithTheirRolesAndPermissions",
      "core_db_pool_connections_for_the_replica",
      "0af7651916cd43dd8448eb211c80319c",
      "12345678901234567890123456789012345678901234",
      "select id from iam.session where token = $1",
    ];
    for (const text of kept) expect(redactText(text)).toBe(text);
  });

  it("takes the value of each name=value whose name is a secret's, and leaves an error's code", () => {
    expect(redactText("GET /verify?token=abc&callbackURL=%2F")).toBe("GET /verify?token=[redacted]&callbackURL=%2F");
    expect(redactText("code=123456 state=xyz user_code=ABCD-EFGH")).toBe("code=[redacted] state=[redacted] user_code=[redacted]");
    expect(redactText("code=ECONNREFUSED limit=10")).toBe("code=ECONNREFUSED limit=10");
  });

  it("reads a long text once: what no shape matches costs no more than its length (a quadratic reading took seconds here)", () => {
    const started = performance.now();
    for (const text of ["a.".repeat(50_000) + "=", "eyJ".repeat(30_000) + ".", "x_secret_".repeat(10_000), `${"A".repeat(39)}-`.repeat(2_500)]) redactText(text);
    // linear, these take a few milliseconds; read again from each character they took five seconds
    expect(performance.now() - started).toBeLessThan(1_500);
  });

  it("names secrets without regard to case, dashes or underscores", () => {
    for (const name of ["password", "newPassword", "refresh_token", "x-api-key", "clientSecret", "Authorization", "cookie", "code", "state", "user_code", "code_verifier", "backupCodes", "totpURI"]) {
      expect(isSecretName(name), name).toBe(true);
    }
    for (const name of ["requestId", "orgId", "path", "status", "keyId", "platformId", "codes_sent", "statement"]) expect(isSecretName(name), name).toBe(false);
  });
});

describe("a path as it may be logged", () => {
  const secrets = new SecretRoutes({ "/portal/:id": ["id"], "/invitations/{id}": ["id"] });

  it("redacts declared parameters for the route that answered, and for routes below it", () => {
    expect(loggablePath("/portal/abc", secrets, "/portal/:id")).toBe("/portal/[redacted]");
    expect(loggablePath("/portal/abc/invoices/in_1", secrets, "/portal/:id/invoices/:invoiceId")).toBe("/portal/[redacted]/invoices/in_1");
    expect(loggablePath("/portal/open", secrets, "/portal/open")).toBe("/portal/open");
    expect(loggablePath("/invitations/abc/accept", secrets, "/invitations/:id/accept")).toBe("/invitations/[redacted]/accept");
  });

  it("matches declared patterns against the path itself when no route answered, or a wildcard did", () => {
    expect(loggablePath("/portal/abc/nowhere", secrets)).toBe("/portal/[redacted]/nowhere");
    expect(loggablePath("/Portal/abc", secrets, "/*")).toBe("/Portal/[redacted]");
    expect(loggablePath("/portal", secrets)).toBe("/portal");
    expect(loggablePath("/portal/", secrets)).toBe("/portal/");
  });

  it("redacts credential-shaped segments, %-encoded ones too, on any path", () => {
    const portal = `bps_${random()}`;
    expect(loggablePath(`/x/${portal}/y`)).toBe("/x/[redacted]/y");
    expect(loggablePath(`/x/${encodeURIComponent(portal).replace("_", "%5F")}`)).toBe("/x/[redacted]");
  });

  it("keeps query names, and redacts the values of secret names and credential-shaped values", () => {
    const device = random();
    expect(loggablePath(`/device?user_code=ABCD-EFGH&platformId=plt_1&next=${device}&limit=5`)).toBe("/device?user_code=[redacted]&platformId=plt_1&next=[redacted]&limit=5");
  });

  it("gives an absolute URL its origin and its loggable path, without the query", () => {
    expect(loggableUrl(`http://127.0.0.1:4100/portal/bps_${random()}?token=abc`)).toBe("http://127.0.0.1:4100/portal/[redacted]");
  });
});
