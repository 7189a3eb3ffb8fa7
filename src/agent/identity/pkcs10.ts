// The machine's PKCS#10 certificate request (RFC 2986), encoded with node:crypto alone. The
// request has one fixed shape: a subject of one CN and one O, an ECDSA P-256 public key, no
// attributes, signed with ECDSA-SHA256. @peculiar/x509 built it before, and kept about 19 MiB of
// the idle agent's RSS for the life of the process to make one request at the join and one per
// renewal (docs/adr/agent-csr-without-x509.md). The encoding is checked against that library's
// own output and against OpenSSL's verification (test/unit/pkcs10.test.ts); the API server
// checks the signature again when the request is filed.
import { createPrivateKey, createPublicKey, sign, type KeyObject } from "node:crypto";
import { AgentError } from "../errors.js";

/** DER's tag-length-value: the length in its short form under 128, long form above. */
function tlv(tag: number, content: Buffer): Buffer {
  const n = content.length;
  let len: Buffer;
  if (n < 0x80) len = Buffer.from([n]);
  else {
    const bytes: number[] = [];
    for (let v = n; v > 0; v = Math.floor(v / 256)) bytes.unshift(v % 256);
    len = Buffer.from([0x80 | bytes.length, ...bytes]);
  }
  return Buffer.concat([Buffer.from([tag]), len, content]);
}

const SEQUENCE = 0x30;
const SET = 0x31;
const INTEGER = 0x02;
const BIT_STRING = 0x03;
const UTF8_STRING = 0x0c;
const PRINTABLE_STRING = 0x13;
/** [0] IMPLICIT, constructed: the request's attributes (none here). */
const ATTRIBUTES = 0xa0;

/** Pre-encoded OBJECT IDENTIFIERs (tag, length, arcs). */
const OID_CN = Buffer.from("0603550403", "hex"); // 2.5.4.3
const OID_O = Buffer.from("060355040a", "hex"); // 2.5.4.10
const OID_ECDSA_SHA256 = Buffer.from("06082a8648ce3d040302", "hex"); // 1.2.840.10045.4.3.2

/** X.520's PrintableString alphabet; anything else is a UTF8String (as @peculiar/x509 chooses). */
const PRINTABLE = /^[A-Za-z0-9 '()+,\-./:=?]*$/;

function directoryString(value: string): Buffer {
  return tlv(PRINTABLE.test(value) ? PRINTABLE_STRING : UTF8_STRING, Buffer.from(value, "utf8"));
}

/** One relative distinguished name holding one attribute. */
function rdn(oid: Buffer, value: string): Buffer {
  return tlv(SET, tlv(SEQUENCE, Buffer.concat([oid, directoryString(value)])));
}

export interface RequestSubject {
  commonName: string;
  organization: string;
}

/** CertificationRequestInfo: version 0, the subject, the public key, no attributes. */
export function requestInfo(subject: RequestSubject, publicKey: KeyObject): Buffer {
  const name = tlv(
    SEQUENCE,
    Buffer.concat([rdn(OID_CN, subject.commonName), rdn(OID_O, subject.organization)]),
  );
  const spki = publicKey.export({ type: "spki", format: "der" });
  const version = tlv(INTEGER, Buffer.from([0]));
  return tlv(SEQUENCE, Buffer.concat([version, name, spki, tlv(ATTRIBUTES, Buffer.alloc(0))]));
}

/** The signed request as PEM, for an EC P-256 private key in PKCS#8 PEM. */
export function pkcs10Pem(subject: RequestSubject, keyPem: string): string {
  const key = createPrivateKey(keyPem);
  const curve = key.asymmetricKeyDetails?.namedCurve;
  if (key.asymmetricKeyType !== "ec" || curve !== "prime256v1")
    throw new AgentError(
      "LIKEN_AGENT_IDENTITY_UNAVAILABLE",
      `the machine's key is ${key.asymmetricKeyType ?? "unknown"}${curve === undefined ? "" : ` ${curve}`}, and a certificate request is made for an EC P-256 key only (the key the agent makes); remove the key file and the agent makes a new one`,
      { context: { type: key.asymmetricKeyType, curve } },
    );
  const info = requestInfo(subject, createPublicKey(key));
  // ECDSA's signature as DER (SEQUENCE of r and s) is what X.509 carries in the BIT STRING.
  const signature = sign("sha256", info, { key, dsaEncoding: "der" });
  const der = tlv(
    SEQUENCE,
    Buffer.concat([
      info,
      tlv(SEQUENCE, OID_ECDSA_SHA256),
      // A BIT STRING's first byte counts the unused bits of its last byte: none.
      tlv(BIT_STRING, Buffer.concat([Buffer.from([0]), signature])),
    ]),
  );
  const lines = der.toString("base64").match(/.{1,64}/g) ?? [];
  return `-----BEGIN CERTIFICATE REQUEST-----\n${lines.join("\n")}\n-----END CERTIFICATE REQUEST-----\n`;
}
