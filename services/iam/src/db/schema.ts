import { sql } from "drizzle-orm";
import { bigint, bigserial, boolean, index, integer, jsonb, pgSchema, primaryKey, text, timestamp, uniqueIndex } from "drizzle-orm/pg-core";
import { webhookTables } from "@core/webhooks";

/**
 * IAM's tables, in its own Postgres schema (DESIGN §2). The first group holds better-auth's models
 * (core, organization, API key, JWT and rate-limit), written from its documented schema: the
 * drizzle adapter finds tables by the export name and columns by property name. The second group
 * is ours: role mappings, grants, platform status, audit and rate-limit windows.
 */
export const iam = pgSchema("iam");

const ts = (name: string) => timestamp(name, { withTimezone: true, precision: 3 });

// ── better-auth models ──────────────────────────────────────────────────────────────────────────

export const user = iam.table("user", {
  id: text("id").primaryKey(),
  name: text("name").notNull(),
  email: text("email").notNull().unique(),
  emailVerified: boolean("email_verified").default(false).notNull(),
  image: text("image"),
  createdAt: ts("created_at").defaultNow().notNull(),
  updatedAt: ts("updated_at").defaultNow().notNull(),
  // the two-factor plugin's field: TOTP confirmed (two-factor.ts)
  twoFactorEnabled: boolean("two_factor_enabled").default(false),
});

export const session = iam.table(
  "session",
  {
    id: text("id").primaryKey(),
    expiresAt: ts("expires_at").notNull(),
    // the hot path of every request resolves a session by this column (unique → indexed)
    token: text("token").notNull().unique(),
    createdAt: ts("created_at").defaultNow().notNull(),
    updatedAt: ts("updated_at").defaultNow().notNull(),
    ipAddress: text("ip_address"),
    userAgent: text("user_agent"),
    userId: text("user_id")
      .notNull()
      .references(() => user.id, { onDelete: "cascade" }),
    activeOrganizationId: text("active_organization_id"),
    /** how the session was made (sign-in-method.ts): password, password+totp, magic_link, passkey, sso, device…; null for older sessions */
    signInMethod: text("sign_in_method"),
    /** the SSO provider a session signed in through (organization policy: "meets SSO") */
    ssoProviderId: text("sso_provider_id"),
  },
  (t) => [index("session_user_id_idx").on(t.userId)],
);

export const account = iam.table(
  "account",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id").notNull(),
    providerId: text("provider_id").notNull(),
    userId: text("user_id")
      .notNull()
      .references(() => user.id, { onDelete: "cascade" }),
    accessToken: text("access_token"),
    refreshToken: text("refresh_token"),
    idToken: text("id_token"),
    accessTokenExpiresAt: ts("access_token_expires_at"),
    refreshTokenExpiresAt: ts("refresh_token_expires_at"),
    scope: text("scope"),
    password: text("password"),
    createdAt: ts("created_at").defaultNow().notNull(),
    updatedAt: ts("updated_at").defaultNow().notNull(),
  },
  (t) => [index("account_user_id_idx").on(t.userId)],
);

export const verification = iam.table(
  "verification",
  {
    id: text("id").primaryKey(),
    identifier: text("identifier").notNull(),
    value: text("value").notNull(),
    expiresAt: ts("expires_at").notNull(),
    createdAt: ts("created_at").defaultNow().notNull(),
    updatedAt: ts("updated_at").defaultNow().notNull(),
  },
  (t) => [index("verification_identifier_idx").on(t.identifier)],
);

export const organization = iam.table("organization", {
  id: text("id").primaryKey(),
  name: text("name").notNull(),
  // unique: of two concurrent set-ups with one slug exactly one wins
  slug: text("slug").notNull().unique(),
  logo: text("logo"),
  createdAt: ts("created_at").notNull(),
  metadata: text("metadata"),
  orgType: text("org_type", { enum: ["core-operator", "tenant"] }).notNull().default("tenant"),
  platformId: text("platform_id").unique(),
});

/**
 * Organization set-ups whose platform is not linked yet (spec §4.3: the organization, then its
 * platform through the registry). Written with the organization and removed when the platform is
 * linked or the organization rolled back; a row left behind by a process that died in between is
 * finished by the sweeper (org-setup-recovery.ts), so nothing stays half-made.
 */
export const orgSetups = iam.table("org_setups", {
  orgId: text("org_id")
    .primaryKey()
    .references(() => organization.id, { onDelete: "cascade" }),
  startedAt: ts("started_at").notNull(),
});

export const member = iam.table(
  "member",
  {
    id: text("id").primaryKey(),
    organizationId: text("organization_id")
      .notNull()
      .references(() => organization.id, { onDelete: "cascade" }),
    userId: text("user_id")
      .notNull()
      .references(() => user.id, { onDelete: "cascade" }),
    role: text("role").default("member").notNull(),
    createdAt: ts("created_at").notNull(),
  },
  (t) => [
    index("member_organization_id_idx").on(t.organizationId),
    index("member_user_id_idx").on(t.userId),
    // one membership per person and organization, whichever path adds it (routes/auth-library.ts)
    uniqueIndex("member_organization_user_unique").on(t.organizationId, t.userId),
  ],
);

export const invitation = iam.table(
  "invitation",
  {
    id: text("id").primaryKey(),
    organizationId: text("organization_id")
      .notNull()
      .references(() => organization.id, { onDelete: "cascade" }),
    email: text("email").notNull(),
    role: text("role"),
    status: text("status").default("pending").notNull(),
    expiresAt: ts("expires_at").notNull(),
    createdAt: ts("created_at").defaultNow().notNull(),
    inviterId: text("inviter_id")
      .notNull()
      .references(() => user.id, { onDelete: "cascade" }),
  },
  (t) => [
    index("invitation_organization_id_idx").on(t.organizationId, t.createdAt, t.id),
    index("invitation_email_idx").on(t.email),
    // one pending invitation per organization and address, whichever route makes it (docs/vault/services/iam.md#Invitations)
    uniqueIndex("invitation_pending_unique").on(t.organizationId, sql`lower(${t.email})`).where(sql`${t.status} = 'pending'`),
  ],
);

export const apikey = iam.table(
  "apikey",
  {
    id: text("id").primaryKey(),
    configId: text("config_id").default("default").notNull(),
    name: text("name"),
    start: text("start"),
    referenceId: text("reference_id").notNull(),
    prefix: text("prefix"),
    // SHA-256 of the key: the raw key is shown once and never stored
    key: text("key").notNull(),
    refillInterval: integer("refill_interval"),
    refillAmount: integer("refill_amount"),
    lastRefillAt: ts("last_refill_at"),
    enabled: boolean("enabled").default(true),
    rateLimitEnabled: boolean("rate_limit_enabled").default(true),
    rateLimitTimeWindow: integer("rate_limit_time_window").default(86400000),
    rateLimitMax: integer("rate_limit_max").default(10),
    requestCount: integer("request_count").default(0),
    remaining: integer("remaining"),
    lastRequest: ts("last_request"),
    expiresAt: ts("expires_at"),
    createdAt: ts("created_at").notNull(),
    updatedAt: ts("updated_at").notNull(),
    permissions: text("permissions"),
    metadata: text("metadata"),
  },
  (t) => [
    index("apikey_config_id_idx").on(t.configId),
    index("apikey_reference_id_idx").on(t.referenceId),
    index("apikey_key_idx").on(t.key),
  ],
);

/**
 * The SSO plugin's providers (@better-auth/sso): one OpenID Connect provider per organization.
 * `domain` holds the email domains it owns, comma-separated as the plugin reads them;
 * `domainVerified` is set by an operator's approval (sso.ts), never by the owner who registers it;
 * `defaultRole` is the role people join the organization with on their first SSO sign-in.
 * `oidcConfig` is the plugin's JSON, client secret included: it is never answered back (sso.ts).
 */
export const ssoProvider = iam.table(
  "sso_provider",
  {
    id: text("id").primaryKey(),
    issuer: text("issuer").notNull(),
    oidcConfig: text("oidc_config"),
    samlConfig: text("saml_config"),
    userId: text("user_id").references(() => user.id, { onDelete: "set null" }),
    providerId: text("provider_id").notNull().unique(),
    organizationId: text("organization_id").references(() => organization.id, { onDelete: "cascade" }),
    domain: text("domain").notNull(),
    domainVerified: boolean("domain_verified").default(false).notNull(),
    defaultRole: text("default_role").default("member").notNull(),
  },
  (t) => [index("sso_provider_organization_id_idx").on(t.organizationId)],
);

export const jwks = iam.table("jwks", {
  id: text("id").primaryKey(),
  publicKey: text("public_key").notNull(),
  privateKey: text("private_key").notNull(),
  createdAt: ts("created_at").notNull(),
  expiresAt: ts("expires_at"),
  alg: text("alg"),
  crv: text("crv"),
});

/** The two-factor plugin's TOTP secret and backup codes, both encrypted with the auth secret. */
export const twoFactor = iam.table(
  "two_factor",
  {
    id: text("id").primaryKey(),
    secret: text("secret").notNull(),
    backupCodes: text("backup_codes").notNull(),
    userId: text("user_id")
      .notNull()
      .references(() => user.id, { onDelete: "cascade" }),
    verified: boolean("verified").default(true),
    failedVerificationCount: integer("failed_verification_count").default(0),
    lockedUntil: ts("locked_until"),
  },
  (t) => [index("two_factor_user_id_idx").on(t.userId), index("two_factor_secret_idx").on(t.secret)],
);

export const rateLimit = iam.table("rate_limit", {
  id: text("id").primaryKey(),
  key: text("key").notNull().unique(),
  count: integer("count").notNull(),
  lastRequest: bigint("last_request", { mode: "number" }).notNull(),
});

/**
 * WebAuthn credentials of the passkey plugin (@better-auth/passkey): the public key only, never a
 * secret. A credential id names one credential of one user (the sign-in looks a passkey up by it).
 */
export const passkey = iam.table(
  "passkey",
  {
    id: text("id").primaryKey(),
    name: text("name"),
    publicKey: text("public_key").notNull(),
    userId: text("user_id")
      .notNull()
      .references(() => user.id, { onDelete: "cascade" }),
    credentialID: text("credential_id").notNull(),
    // WebAuthn's signature counter is an unsigned 32-bit number: past an integer's range
    counter: bigint("counter", { mode: "number" }).notNull(),
    deviceType: text("device_type").notNull(),
    backedUp: boolean("backed_up").notNull(),
    transports: text("transports"),
    createdAt: ts("created_at"),
    aaguid: text("aaguid"),
  },
  (t) => [index("passkey_user_id_idx").on(t.userId), uniqueIndex("passkey_credential_id_idx").on(t.credentialID)],
);

/**
 * The OAuth provider plugin's tables (@better-auth/oauth-provider; ADR 0028): IAM as the
 * authorization server of MCP clients. Clients register themselves (RFC 7591) and hold no secret
 * (public clients); the vault's MCP URL is the one resource (RFC 8707). Refresh tokens and opaque
 * access tokens are stored hashed; JWT access tokens are not stored. A consent's `referenceId` is the
 * organization the person acted in (oauth-provider.ts). Separate from the CLI's device flow tables.
 * Unlike the plugin's own schema, a token's session id has no foreign key: the plugin would only
 * unlink a token from its ended session, where IAM revokes it.
 */
export const oauthClient = iam.table(
  "oauth_client",
  {
    id: text("id").primaryKey(),
    clientId: text("client_id").notNull().unique(),
    clientSecret: text("client_secret"),
    clientDiscoveryId: text("client_discovery_id"),
    disabled: boolean("disabled").default(false),
    skipConsent: boolean("skip_consent"),
    enableEndSession: boolean("enable_end_session"),
    subjectType: text("subject_type"),
    scopes: text("scopes").array(),
    clientCredentialsScopes: text("client_credentials_scopes").array().default(sql`'{}'::text[]`),
    userId: text("user_id").references(() => user.id, { onDelete: "cascade" }),
    createdAt: ts("created_at"),
    updatedAt: ts("updated_at"),
    name: text("name"),
    uri: text("uri"),
    icon: text("icon"),
    contacts: text("contacts").array(),
    tos: text("tos"),
    policy: text("policy"),
    softwareId: text("software_id"),
    softwareVersion: text("software_version"),
    softwareStatement: text("software_statement"),
    redirectUris: text("redirect_uris").array().notNull(),
    postLogoutRedirectUris: text("post_logout_redirect_uris").array(),
    backchannelLogoutUri: text("backchannel_logout_uri"),
    backchannelLogoutSessionRequired: boolean("backchannel_logout_session_required"),
    tokenEndpointAuthMethod: text("token_endpoint_auth_method"),
    applicationType: text("application_type"),
    jwks: text("jwks"),
    jwksUri: text("jwks_uri"),
    grantTypes: text("grant_types").array(),
    responseTypes: text("response_types").array(),
    requirePKCE: boolean("require_pkce"),
    dpopBoundAccessTokens: boolean("dpop_bound_access_tokens").default(false),
    referenceId: text("reference_id"),
    metadata: jsonb("metadata"),
  },
  (t) => [index("oauth_client_user_id_idx").on(t.userId)],
);

export const oauthResource = iam.table("oauth_resource", {
  id: text("id").primaryKey(),
  identifier: text("identifier").notNull().unique(),
  name: text("name").notNull(),
  accessTokenTtl: integer("access_token_ttl"),
  refreshTokenTtl: integer("refresh_token_ttl"),
  signingAlgorithm: text("signing_algorithm"),
  signingKeyId: text("signing_key_id"),
  allowedScopes: text("allowed_scopes").array(),
  customClaims: jsonb("custom_claims"),
  dpopBoundAccessTokensRequired: boolean("dpop_bound_access_tokens_required").default(false),
  disabled: boolean("disabled").default(false),
  createdAt: ts("created_at"),
  updatedAt: ts("updated_at"),
  policyVersion: integer("policy_version").default(1),
  metadata: jsonb("metadata"),
});

export const oauthClientResource = iam.table(
  "oauth_client_resource",
  {
    id: text("id").primaryKey(),
    clientId: text("client_id")
      .notNull()
      .references(() => oauthClient.clientId, { onDelete: "cascade" }),
    resourceId: text("resource_id")
      .notNull()
      .references(() => oauthResource.identifier, { onDelete: "cascade" }),
    metadata: jsonb("metadata"),
    createdAt: ts("created_at"),
  },
  (t) => [index("oauth_client_resource_client_id_idx").on(t.clientId), index("oauth_client_resource_resource_id_idx").on(t.resourceId), uniqueIndex("oauth_client_resource_pair_idx").on(t.clientId, t.resourceId)],
);

export const oauthRefreshToken = iam.table(
  "oauth_refresh_token",
  {
    id: text("id").primaryKey(),
    token: text("token").notNull().unique(),
    clientId: text("client_id")
      .notNull()
      .references(() => oauthClient.clientId, { onDelete: "cascade" }),
    // no foreign key: when a session ends its id stays, so IAM revokes what was issued through it (oauth-provider.ts)
    sessionId: text("session_id"),
    userId: text("user_id")
      .notNull()
      .references(() => user.id, { onDelete: "cascade" }),
    referenceId: text("reference_id"),
    authorizationCodeId: text("authorization_code_id"),
    resources: text("resources").array(),
    requestedUserInfoClaims: text("requested_user_info_claims").array(),
    expiresAt: ts("expires_at"),
    createdAt: ts("created_at"),
    revoked: ts("revoked"),
    rotatedAt: ts("rotated_at"),
    rotationReplayResponse: text("rotation_replay_response"),
    rotationReplayExpiresAt: ts("rotation_replay_expires_at"),
    authTime: ts("auth_time"),
    confirmation: jsonb("confirmation"),
    scopes: text("scopes").array().notNull(),
  },
  (t) => [
    index("oauth_refresh_token_client_id_idx").on(t.clientId),
    index("oauth_refresh_token_session_id_idx").on(t.sessionId),
    index("oauth_refresh_token_user_id_idx").on(t.userId),
    index("oauth_refresh_token_authorization_code_id_idx").on(t.authorizationCodeId),
  ],
);

export const oauthAccessToken = iam.table(
  "oauth_access_token",
  {
    id: text("id").primaryKey(),
    token: text("token").unique(),
    clientId: text("client_id")
      .notNull()
      .references(() => oauthClient.clientId, { onDelete: "cascade" }),
    // no foreign key: when a session ends its id stays, so IAM revokes what was issued through it (oauth-provider.ts)
    sessionId: text("session_id"),
    userId: text("user_id").references(() => user.id, { onDelete: "cascade" }),
    referenceId: text("reference_id"),
    authorizationCodeId: text("authorization_code_id"),
    resources: text("resources").array(),
    requestedUserInfoClaims: text("requested_user_info_claims").array(),
    refreshId: text("refresh_id").references(() => oauthRefreshToken.id, { onDelete: "cascade" }),
    expiresAt: ts("expires_at"),
    createdAt: ts("created_at"),
    revoked: ts("revoked"),
    confirmation: jsonb("confirmation"),
    scopes: text("scopes").array().notNull(),
  },
  (t) => [
    index("oauth_access_token_client_id_idx").on(t.clientId),
    index("oauth_access_token_session_id_idx").on(t.sessionId),
    index("oauth_access_token_user_id_idx").on(t.userId),
    index("oauth_access_token_authorization_code_id_idx").on(t.authorizationCodeId),
    index("oauth_access_token_refresh_id_idx").on(t.refreshId),
  ],
);

export const oauthConsent = iam.table(
  "oauth_consent",
  {
    id: text("id").primaryKey(),
    clientId: text("client_id")
      .notNull()
      .references(() => oauthClient.clientId, { onDelete: "cascade" }),
    userId: text("user_id").references(() => user.id, { onDelete: "cascade" }),
    referenceId: text("reference_id"),
    resources: text("resources").array(),
    requestedUserInfoClaims: text("requested_user_info_claims").array(),
    scopes: text("scopes").array().notNull(),
    createdAt: ts("created_at"),
    updatedAt: ts("updated_at"),
  },
  (t) => [index("oauth_consent_client_id_idx").on(t.clientId), index("oauth_consent_user_id_idx").on(t.userId)],
);

export const oauthClientAssertion = iam.table("oauth_client_assertion", {
  id: text("id").primaryKey(),
  expiresAt: ts("expires_at").notNull(),
});

// ── ours ────────────────────────────────────────────────────────────────────────────────────────

/**
 * The clients known by their metadata document (client-metadata.ts): when the document was last
 * fetched, when it is fetched again, and until when the stored copy stands in while its host does
 * not answer. The client itself is a row of `oauth_client`, owned by the discovery (`client_discovery_id`).
 */
export const clientMetadataDocuments = iam.table("client_metadata_documents", {
  clientId: text("client_id")
    .primaryKey()
    .references(() => oauthClient.clientId, { onDelete: "cascade" }),
  fetchedAt: ts("fetched_at").notNull(),
  refreshAt: ts("refresh_at").notNull(),
  expiresAt: ts("expires_at").notNull(),
});

/** Per-organization overrides of a role's permissions (spec §4.3 `/api/core/roles`). */
export const roleMappings = iam.table(
  "role_mappings",
  {
    orgId: text("org_id")
      .notNull()
      .references(() => organization.id, { onDelete: "cascade" }),
    role: text("role").notNull(),
    permissions: jsonb("permissions").$type<string[]>().notNull(),
    updatedAt: ts("updated_at").notNull(),
    updatedBy: text("updated_by"),
  },
  (t) => [primaryKey({ columns: [t.orgId, t.role] })],
);

/** Per-user grants (granted = true) and denials (false), optionally expiring (Unix seconds). */
export const grants = iam.table(
  "grants",
  {
    id: text("id").primaryKey(),
    userId: text("user_id")
      .notNull()
      .references(() => user.id, { onDelete: "cascade" }),
    orgId: text("org_id")
      .notNull()
      .references(() => organization.id, { onDelete: "cascade" }),
    permission: text("permission").notNull(),
    granted: boolean("granted").notNull(),
    grantedBy: text("granted_by").notNull(),
    expiresAt: bigint("expires_at", { mode: "number" }),
    createdAt: ts("created_at").notNull(),
  },
  (t) => [index("grants_org_user_idx").on(t.orgId, t.userId)],
);

/** Suspension state of each platform, as set through `/internal/platform-status`. */
export const platformStatus = iam.table("platform_status", {
  platformId: text("platform_id").primaryKey(),
  status: text("status", { enum: ["active", "suspended"] }).notNull(),
  updatedAt: ts("updated_at").notNull(),
  updatedBy: text("updated_by"),
});

/** The audit log of authentication and authorization events (DESIGN §4). */
export const auditEvents = iam.table(
  "audit_events",
  {
    id: text("id").primaryKey(),
    at: bigint("at", { mode: "number" }).notNull(),
    /** insertion order: events of the same second list newest first by it */
    seq: bigserial("seq", { mode: "number" }).notNull(),
    action: text("action").notNull(),
    outcome: text("outcome", { enum: ["success", "failure"] }).notNull(),
    actorType: text("actor_type").notNull(),
    actorId: text("actor_id"),
    orgId: text("org_id"),
    targetType: text("target_type"),
    targetId: text("target_id"),
    ip: text("ip"),
    userAgent: text("user_agent"),
    requestId: text("request_id"),
    metadata: jsonb("metadata").$type<Record<string, unknown>>(),
  },
  (t) => [
    index("audit_events_page_idx").on(t.at, t.seq),
    index("audit_events_org_idx").on(t.orgId, t.at),
    index("audit_events_actor_idx").on(t.actorId, t.at),
  ],
);

/** Fixed-window counters of our own rate limits (API key validation), shared by replicas. */
export const rateWindows = iam.table(
  "rate_windows",
  {
    key: text("key").notNull(),
    windowStart: bigint("window_start", { mode: "number" }).notNull(),
    count: integer("count").notNull(),
  },
  (t) => [primaryKey({ columns: [t.key, t.windowStart] })],
);

/**
 * Device authorization requests of the CLI (RFC 8628, DESIGN §5). The device code is kept only
 * as a SHA-256 digest; the user code is unique among pending requests.
 */
export const deviceCodes = iam.table(
  "device_codes",
  {
    id: text("id").primaryKey(),
    deviceCodeHash: text("device_code_hash").notNull().unique(),
    userCode: text("user_code").notNull(),
    clientId: text("client_id").notNull(),
    status: text("status", { enum: ["pending", "approved", "denied", "consumed"] }).notNull(),
    userId: text("user_id").references(() => user.id, { onDelete: "cascade" }),
    intervalSeconds: integer("interval_seconds").notNull(),
    lastPolledAt: bigint("last_polled_at", { mode: "number" }),
    requesterIp: text("requester_ip"),
    requesterAgent: text("requester_agent"),
    expiresAt: ts("expires_at").notNull(),
    createdAt: ts("created_at").notNull(),
    decidedAt: ts("decided_at"),
    // the session that approved the login, and how it signed in: the login is made with that
    // strength and never more (docs/vault/cross-cutting/security.md)
    approvedBySessionId: text("approved_by_session_id"),
    approvedSignInMethod: text("approved_sign_in_method"),
    approvedSsoProviderId: text("approved_sso_provider_id"),
  },
  (t) => [
    uniqueIndex("device_codes_pending_user_code").on(t.userCode).where(sql`${t.status} = 'pending'`),
    index("device_codes_expires_idx").on(t.expiresAt),
  ],
);

/**
 * Refresh tokens of the CLI: stored as digests, rotated on every use; all tokens of one login
 * share a family, so presenting a spent one can revoke them all (RFC 9700 §4.14).
 */
export const refreshTokens = iam.table(
  "refresh_tokens",
  {
    id: text("id").primaryKey(),
    tokenHash: text("token_hash").notNull().unique(),
    familyId: text("family_id").notNull(),
    userId: text("user_id")
      .notNull()
      .references(() => user.id, { onDelete: "cascade" }),
    clientId: text("client_id").notNull(),
    /** the access session issued together with this refresh token */
    sessionId: text("session_id").notNull(),
    expiresAt: ts("expires_at").notNull(),
    createdAt: ts("created_at").notNull(),
    usedAt: ts("used_at"),
    revokedAt: ts("revoked_at"),
    /** the browser session that approved the login: ending it ends the whole family (session-revocation.ts) */
    madeBySessionId: text("made_by_session_id"),
    /** how the approving session signed in, carried to every session of the family (two-factor.ts meetsTwoFactor) */
    signInMethod: text("sign_in_method"),
    ssoProviderId: text("sso_provider_id"),
  },
  // by session: a session's deletion revokes its families (the ones issued with it and the ones it
  // approved), and the library's refresh keeps a CLI token's expiry
  (t) => [
    index("refresh_tokens_family_idx").on(t.familyId),
    index("refresh_tokens_session_idx").on(t.sessionId),
    index("refresh_tokens_made_by_session_idx").on(t.madeBySessionId),
  ],
);

/**
 * The audit log streamed out (ADR 0027): billing's webhook tables (packages/webhooks) in schema
 * `iam`. An endpoint's `org_id` is its scope: null for an operator's endpoint of every
 * organization's events, else the one organization whose events it takes (an owner's).
 */
export const {
  webhookEndpoints: auditEndpoints,
  webhookEvents: auditOutbox,
  webhookDeliveries: auditDeliveries,
  webhookAttempts: auditAttempts,
} = webhookTables(iam, { orgId: text("org_id") });

/**
 * The last TOTP time step accepted per user (two-factor.ts): the plugin accepts a code for three
 * 30-second steps and does not remember it, so a code seen once is refused for the rest of its window.
 */
export const totpSteps = iam.table("totp_steps", {
  userId: text("user_id")
    .primaryKey()
    .references(() => user.id, { onDelete: "cascade" }),
  lastStep: bigint("last_step", { mode: "number" }).notNull(),
});

/** What an organization requires of its members' sessions (org-policy.ts); no row is no requirement. */
export const orgPolicies = iam.table("org_policies", {
  orgId: text("org_id")
    .primaryKey()
    .references(() => organization.id, { onDelete: "cascade" }),
  requireTwoFactor: boolean("require_two_factor").notNull().default(false),
  requireSso: boolean("require_sso").notNull().default(false),
  updatedAt: ts("updated_at").notNull(),
  updatedBy: text("updated_by"),
});
