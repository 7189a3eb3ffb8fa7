// The proof a machine gives when it joins again with the bootstrap credential while its own
// certificate is still valid by its dates but no longer accepted (the cluster's client CA
// rotated): the key of that certificate signs the new request's public key, the machine's name
// and the moment of signing. The agent writes it in three annotations of its
// CertificateSigningRequest (src/agent/identity/); cluster-operator's approver reads it back
// (src/operator/identity/) and compares the key with the digest the Machine last reported
// (status.certificateKeyDigest). docs/adr/rejoin-after-ca-rotation.md says why.
//
// node:crypto only: the agent loads this module (docs/adr/agent-csr-without-x509.md).
import {
  createHash,
  createPrivateKey,
  createPublicKey,
  sign,
  verify,
  type KeyObject,
} from "node:crypto";

/** The SubjectPublicKeyInfo (DER, base64) of the key that signed. */
export const ANNOTATION_REJOIN_KEY = "liken.sh/rejoin-key";
/** When the machine signed (RFC 3339, its own clock). */
export const ANNOTATION_REJOIN_SIGNED_AT = "liken.sh/rejoin-signed-at";
/** The signature (base64) over rejoinMessage(). */
export const ANNOTATION_REJOIN_SIGNATURE = "liken.sh/rejoin-signature";

/** What a proof says once its signature has been checked. */
export interface RejoinProof {
  /** "sha256:<hex>" of the signing key's SubjectPublicKeyInfo, as status.certificateKeyDigest. */
  keyDigest: string;
  signedAtMs: number;
}

/** The digest to sign with: none for EdDSA keys, which hash by themselves; SHA-256 for the rest. */
function digestFor(key: KeyObject): string | null {
  const t = key.asymmetricKeyType;
  return t === "ed25519" || t === "ed448" ? null : "sha256";
}

/** "sha256:<hex>" of a public key's DER SubjectPublicKeyInfo. */
export function keyDigest(key: KeyObject | string | Buffer): string {
  const k =
    typeof key === "object" && "type" in key && key.type === "public" ? key : createPublicKey(key);
  const pub = k.export({ type: "spki", format: "der" });
  return `sha256:${createHash("sha256").update(pub).digest("hex")}`;
}

/**
 * The bytes signed. The new request's key is in it, so a proof copied onto another request
 * (an attacker's key) does not verify; the name, so it cannot serve another machine; the time,
 * so the approver can judge how old it is. A version prefix keeps these bytes from meaning
 * anything else.
 */
export function rejoinMessage(machine: string, newKeyDigest: string, signedAt: string): Buffer {
  return Buffer.from(`liken-rejoin-v1\n${machine}\n${newKeyDigest}\n${signedAt}\n`);
}

/** The annotations for a request of `machine` for `newKeyPem`, signed by `oldKeyPem` now. */
export function rejoinAnnotations(
  machine: string,
  newKeyPem: string,
  oldKeyPem: string | Buffer,
  now: Date,
): Record<string, string> {
  const signedAt = now.toISOString();
  const message = rejoinMessage(machine, keyDigest(newKeyPem), signedAt);
  const old = createPrivateKey(oldKeyPem);
  return {
    [ANNOTATION_REJOIN_KEY]: createPublicKey(old)
      .export({ type: "spki", format: "der" })
      .toString("base64"),
    [ANNOTATION_REJOIN_SIGNED_AT]: signedAt,
    [ANNOTATION_REJOIN_SIGNATURE]: sign(digestFor(old), message, old).toString("base64"),
  };
}

/**
 * The proof a request's annotations carry for `machine` and the request's own key
 * (`requestSpkiDer`): undefined when it carries none, `{ invalid }` when it carries one that
 * does not verify (said in the refusal), the checked facts otherwise.
 */
export function readRejoinProof(
  annotations: Readonly<Record<string, string>> | undefined,
  machine: string,
  requestSpkiDer: Buffer,
): RejoinProof | { invalid: string } | undefined {
  const a = annotations ?? {};
  const key = a[ANNOTATION_REJOIN_KEY];
  const at = a[ANNOTATION_REJOIN_SIGNED_AT];
  const signature = a[ANNOTATION_REJOIN_SIGNATURE];
  if (key === undefined && at === undefined && signature === undefined) return undefined;
  if (key === undefined || at === undefined || signature === undefined) {
    return {
      invalid: `it carries only some of ${ANNOTATION_REJOIN_KEY}, ${ANNOTATION_REJOIN_SIGNED_AT} and ${ANNOTATION_REJOIN_SIGNATURE}`,
    };
  }
  const signedAtMs = Date.parse(at);
  if (!Number.isFinite(signedAtMs))
    return { invalid: `${ANNOTATION_REJOIN_SIGNED_AT} "${at.slice(0, 64)}" is not a time` };
  let pub: KeyObject;
  try {
    pub = createPublicKey({ key: Buffer.from(key, "base64"), format: "der", type: "spki" });
  } catch (e) {
    return { invalid: `${ANNOTATION_REJOIN_KEY} is not a public key (${(e as Error).message})` };
  }
  const newDigest = keyDigest(
    createPublicKey({ key: requestSpkiDer, format: "der", type: "spki" }),
  );
  const message = rejoinMessage(machine, newDigest, at);
  let ok = false;
  try {
    ok = verify(digestFor(pub), message, pub, Buffer.from(signature, "base64"));
  } catch {
    ok = false;
  }
  if (!ok) {
    return {
      invalid: `${ANNOTATION_REJOIN_SIGNATURE} does not verify with ${ANNOTATION_REJOIN_KEY} over this request's key, the name ${machine} and ${at}`,
    };
  }
  return { keyDigest: keyDigest(pub), signedAtMs };
}
