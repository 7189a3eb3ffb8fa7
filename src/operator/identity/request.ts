// Reads a CertificateSigningRequest's PKCS#10 request into the facts ./decide.ts judges: the
// subject, the alternative names, the public key. @peculiar/x509 parses the ASN.1; Node's
// crypto (OpenSSL) names the key and its size, including curves WebCrypto does not know
// (P-224), which are exactly the ones to refuse. The API server has already checked the
// request's signature when it accepted the object.
import "reflect-metadata"; // @peculiar/x509 needs the Reflect metadata API
import * as x509 from "@peculiar/x509";
import { createPublicKey } from "node:crypto";
import type { KeyFacts, RequestFacts } from "./decide.js";

/** OIDs of the subject attributes a machine's request may carry. */
const CN = "2.5.4.3";
const O = "2.5.4.10";
const SAN = "2.5.29.17";

function keyOf(spki: ArrayBuffer): KeyFacts {
  const key = createPublicKey({ key: Buffer.from(spki), format: "der", type: "spki" });
  const d = key.asymmetricKeyDetails ?? {};
  const type = key.asymmetricKeyType;
  if (type === "rsa") return { kind: "rsa", bits: d.modulusLength ?? 0 };
  if (type === "ec") return { kind: "ec", curve: d.namedCurve ?? "unknown" };
  if (type === "ed25519") return { kind: "ed25519" };
  // RSA-PSS-only keys, DSA, X25519 and the rest: not what a machine's agent makes.
  return { kind: "other", name: type ?? "unknown" };
}

/** The facts of a base64-encoded PEM request (spec.request), or why it cannot be read. */
export function readRequest(base64Pem: string): RequestFacts | { unreadable: string } {
  try {
    const pem = Buffer.from(base64Pem, "base64").toString("utf8");
    const req = new x509.Pkcs10CertificateRequest(pem);
    const attributes = req.subjectName.toJSON().flatMap((rdn) => Object.keys(rdn));
    const names = (oid: string): string[] => req.subjectName.getField(oid);
    const other = [...new Set(attributes.filter((a) => a !== "CN" && a !== "O"))];
    const sans = req
      .getExtensions(SAN)
      .map((e) => new x509.SubjectAlternativeNameExtension(e.rawData));
    return {
      commonName: names(CN).length === 1 ? names(CN)[0] : undefined,
      organizations: names(O),
      otherSubject: names(CN).length > 1 ? [...other, "a second CN"] : other,
      alternativeNames: sans.reduce((n, e) => n + e.names.items.length, 0),
      key: keyOf(req.publicKey.rawData),
    };
  } catch (e) {
    return { unreadable: (e as Error).message };
  }
}

/** The request's public key as DER SubjectPublicKeyInfo; undefined when it cannot be read. */
export function requestSpki(base64Pem: string): Buffer | undefined {
  try {
    const pem = Buffer.from(base64Pem, "base64").toString("utf8");
    return Buffer.from(new x509.Pkcs10CertificateRequest(pem).publicKey.rawData);
  } catch {
    return undefined;
  }
}
