import { createHash, generateKeyPairSync, randomBytes, sign, type KeyObject } from "node:crypto";

/**
 * A software WebAuthn authenticator for tests without a browser: it makes a P-256 credential and
 * answers registration ("none" attestation) and authentication ceremonies exactly as the WebAuthn
 * spec lays the bytes out (authenticator data, CBOR attestation object, ES256 signature over
 * authenticator data ‖ SHA-256(clientDataJSON)), so the passkey plugin's real verification
 * (@simplewebauthn/server) checks them. The browser test uses Chromium's virtual authenticator.
 */

const b64url = (bytes: Uint8Array | Buffer) => Buffer.from(bytes).toString("base64url");
const sha256 = (data: Uint8Array | string) => createHash("sha256").update(data).digest();

/** A minimal CBOR encoder: the types an attestation object and a COSE key use. */
function cbor(value: unknown): Buffer {
  const head = (major: number, n: number) => {
    if (n < 24) return Buffer.from([(major << 5) | n]);
    if (n < 256) return Buffer.from([(major << 5) | 24, n]);
    if (n < 65536) return Buffer.from([(major << 5) | 25, n >> 8, n & 0xff]);
    throw new Error("too long for this encoder");
  };
  if (typeof value === "number") return value >= 0 ? head(0, value) : head(1, -1 - value);
  if (typeof value === "string") return Buffer.concat([head(3, Buffer.byteLength(value)), Buffer.from(value)]);
  if (value instanceof Uint8Array) return Buffer.concat([head(2, value.length), Buffer.from(value)]);
  if (value instanceof Map) return Buffer.concat([head(5, value.size), ...[...value].flatMap(([k, v]) => [cbor(k), cbor(v)])]);
  throw new Error(`cannot encode ${typeof value}`);
}

export class SoftwareAuthenticator {
  private readonly privateKey: KeyObject;
  private readonly publicKey: KeyObject;
  /** the signature counter, sent and then raised by each assertion */
  counter = 0;

  /** `credentialId`: another authenticator's, to forge an assertion for a credential with a different key */
  constructor(
    readonly rpId: string,
    readonly origin: string,
    readonly credentialId: Buffer = randomBytes(32),
  ) {
    ({ privateKey: this.privateKey, publicKey: this.publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" }));
  }

  get id() {
    return b64url(this.credentialId);
  }

  private authenticatorData(attested: boolean): Buffer {
    // UP (user present) | UV (user verified) | AT (attested credential data follows)
    const flags = 0x01 | 0x04 | (attested ? 0x40 : 0);
    const count = Buffer.alloc(4);
    count.writeUInt32BE(this.counter);
    const parts: Buffer[] = [sha256(this.rpId), Buffer.from([flags]), count];
    if (attested) {
      const jwk = this.publicKey.export({ format: "jwk" });
      const cose = cbor(new Map<number, unknown>([[1, 2], [3, -7], [-1, 1], [-2, Buffer.from(jwk.x!, "base64url")], [-3, Buffer.from(jwk.y!, "base64url")]]));
      const length = Buffer.alloc(2);
      length.writeUInt16BE(this.credentialId.length);
      parts.push(Buffer.alloc(16), length, this.credentialId, cose);
    }
    return Buffer.concat(parts);
  }

  private clientData(type: "webauthn.create" | "webauthn.get", challenge: string, origin: string) {
    return Buffer.from(JSON.stringify({ type, challenge, origin, crossOrigin: false }));
  }

  /** The answer to `generate-register-options` as the browser would post it to verify-registration. */
  register(options: { challenge: string }, origin = this.origin) {
    const attestationObject = cbor(new Map<string, unknown>([["fmt", "none"], ["attStmt", new Map()], ["authData", this.authenticatorData(true)]]));
    return {
      id: this.id,
      rawId: this.id,
      type: "public-key",
      clientExtensionResults: {},
      response: { clientDataJSON: b64url(this.clientData("webauthn.create", options.challenge, origin)), attestationObject: b64url(attestationObject), transports: ["internal"] },
    };
  }

  /** The answer to `generate-authenticate-options` as the browser would post it to verify-authentication. */
  assert(options: { challenge: string }, origin = this.origin) {
    this.counter += 1;
    const authenticatorData = this.authenticatorData(false);
    const clientDataJSON = this.clientData("webauthn.get", options.challenge, origin);
    const signature = sign("sha256", Buffer.concat([authenticatorData, sha256(clientDataJSON)]), this.privateKey);
    return {
      id: this.id,
      rawId: this.id,
      type: "public-key",
      clientExtensionResults: {},
      response: { clientDataJSON: b64url(clientDataJSON), authenticatorData: b64url(authenticatorData), signature: b64url(signature) },
    };
  }
}
