// The webhook's TLS material: a CA of its own and a serving certificate it signs, both
// ECDSA P-256 (made in milliseconds, so a start is not slowed), as PEM. The API server trusts
// the CA through the caBundle of the webhook configuration; the serving certificate names the
// Service's DNS names and the loopback addresses (the lab and tests call it by URL).
// Built with @peculiar/x509 over Node's WebCrypto: Node itself cannot issue certificates.
import "reflect-metadata"; // @peculiar/x509 needs the Reflect metadata API
import * as x509 from "@peculiar/x509";
import { X509Certificate, webcrypto } from "node:crypto";
import { isIP } from "node:net";

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

type KeyPair = webcrypto.CryptoKeyPair;

export interface TlsMaterial {
  caCert: string;
  /** Kept so a later version can re-issue the serving certificate from the same CA. */
  caKey: string;
  cert: string;
  key: string;
}

/**
 * Ten years: the certificate never leaves the cluster's Secret and the API server's
 * caBundle, and a renewal would be one more moving part in every fleet. Delete the Secret to
 * rotate (docs/operator.md).
 */
const VALID_DAYS = 3650;
const ALG = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" } as const;

async function pkcs8Pem(key: webcrypto.CryptoKey): Promise<string> {
  return x509.PemConverter.encode(await webcrypto.subtle.exportKey("pkcs8", key), "PRIVATE KEY");
}

function serial(): string {
  // Positive (high bit clear) 16-byte serial, as RFC 5280 asks.
  const b = webcrypto.getRandomValues(new Uint8Array(16));
  b[0] = b[0]! & 0x7f;
  return Buffer.from(b).toString("hex");
}

/** A fresh CA and a serving certificate for `hosts` (DNS names or IP addresses). */
export async function issueTlsMaterial(hosts: string[], now = new Date()): Promise<TlsMaterial> {
  const notAfter = new Date(now.getTime() + VALID_DAYS * 86_400_000);
  const notBefore = new Date(now.getTime() - 60_000); // a clock a little behind still trusts it
  const caKeys = (await webcrypto.subtle.generateKey(ALG, true, ["sign", "verify"])) as KeyPair;
  const ca = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial(),
    name: "CN=liken cluster-operator webhook CA",
    notBefore,
    notAfter,
    keys: caKeys,
    signingAlgorithm: ALG,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(
        x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign,
        true,
      ),
    ],
  });
  const keys = (await webcrypto.subtle.generateKey(ALG, true, ["sign", "verify"])) as KeyPair;
  const names = hosts.map((h) =>
    isIP(h) === 0 ? { type: "dns" as const, value: h } : { type: "ip" as const, value: h },
  );
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: serial(),
    subject: `CN=${hosts[0] ?? "cluster-operator-webhook"}`,
    issuer: ca.subject,
    notBefore,
    notAfter,
    publicKey: keys.publicKey,
    signingKey: caKeys.privateKey,
    signingAlgorithm: ALG,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
      new x509.SubjectAlternativeNameExtension(names),
    ],
  });
  return {
    caCert: ca.toString("pem"),
    caKey: await pkcs8Pem(caKeys.privateKey),
    cert: cert.toString("pem"),
    key: await pkcs8Pem(keys.privateKey),
  };
}

/** The hosts of `wanted` that the serving certificate does not name (empty: it covers all). */
export function uncoveredHosts(certPem: string, wanted: string[]): string[] {
  const cert = new X509Certificate(certPem);
  return wanted.filter((h) => (isIP(h) === 0 ? cert.checkHost(h) : cert.checkIP(h)) === undefined);
}
