// The machine's certificate request, encoded with node:crypto (src/agent/identity/pkcs10.ts),
// read by the libraries that read it in production: @peculiar/x509 (cluster-operator's
// approver) parses it and checks its signature, and the signed part is byte for byte what that
// library builds for the same key and subject.
import "reflect-metadata";
import * as x509 from "@peculiar/x509";
import { createPrivateKey, createPublicKey, generateKeyPairSync, webcrypto } from "node:crypto";
import { describe, expect, it } from "vitest";
import { pkcs10Pem, requestInfo } from "../../src/agent/identity/pkcs10.js";
import { buildRequest, newKey } from "../../src/agent/identity/request.js";
import { readRequest } from "../../src/operator/identity/request.js";
import { isLikenError } from "../../src/errors.js";

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

/** The DER of a PEM block. */
function derOf(pem: string): Buffer {
  return Buffer.from(pem.replace(/-----[^-]+-----/g, "").replace(/\s+/g, ""), "base64");
}

/** A TLV's total length at `at` (tag, length octets, content). */
function tlvLength(der: Buffer, at: number): number {
  const first = der[at + 1]!;
  if (first < 0x80) return 2 + first;
  const n = first & 0x7f;
  return 2 + n + der.subarray(at + 2, at + 2 + n).reduce((v, b) => v * 256 + b, 0);
}

/** CertificationRequestInfo: the first element inside the outer SEQUENCE. */
function infoOf(der: Buffer): Buffer {
  expect(tlvLength(der, 0)).toBe(der.length);
  const at = der[1]! < 0x80 ? 2 : 2 + (der[1]! & 0x7f);
  return der.subarray(at, at + tlvLength(der, at));
}

/** The same request as @peculiar/x509 builds it (what the agent used before). */
async function libraryRequest(name: string, keyPem: string): Promise<Buffer> {
  const alg = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" } as const;
  const priv = createPrivateKey(keyPem);
  const keys = {
    privateKey: await webcrypto.subtle.importKey(
      "pkcs8",
      priv.export({ type: "pkcs8", format: "der" }),
      alg,
      false,
      ["sign"],
    ),
    publicKey: await webcrypto.subtle.importKey(
      "spki",
      createPublicKey(priv).export({ type: "spki", format: "der" }),
      alg,
      true,
      ["verify"],
    ),
  };
  const csr = await x509.Pkcs10CertificateRequestGenerator.create({
    name,
    keys,
    signingAlgorithm: alg,
  });
  return Buffer.from(csr.rawData);
}

describe("pkcs10: the machine's certificate request without a library", () => {
  it.each([
    ["a DNS name (PrintableString)", "worker-1.example.com"],
    ["a name outside PrintableString (UTF8String)", "wörker_1"],
    ["a name long enough for a two-byte length", "m".repeat(200)],
  ])("signs over the bytes @peculiar/x509 builds for %s", async (_why, machine) => {
    const keyPem = newKey();
    const cn = `liken:machine:${machine}`;
    const mine = derOf(pkcs10Pem({ commonName: cn, organization: "liken:machines" }, keyPem));
    const theirs = await libraryRequest(`CN=${cn}, O=liken:machines`, keyPem);
    expect(infoOf(mine).toString("hex")).toBe(infoOf(theirs).toString("hex"));
    const parsed = new x509.Pkcs10CertificateRequest(mine);
    expect(await parsed.verify()).toBe(true);
    expect(parsed.subject).toBe(`CN=${cn}, O=liken:machines`);
  });

  it("is read by cluster-operator's approver as the machine's request", async () => {
    const b64 = await buildRequest("worker-7", newKey());
    expect(readRequest(b64)).toEqual({
      commonName: "liken:machine:worker-7",
      organizations: ["liken:machines"],
      otherSubject: [],
      alternativeNames: 0,
      key: { kind: "ec", curve: "prime256v1" },
    });
  });

  it("refuses a key that is not EC P-256, naming it and what to do", () => {
    const { privateKey } = generateKeyPairSync("ec", { namedCurve: "secp384r1" });
    const pem = privateKey.export({ type: "pkcs8", format: "pem" }).toString();
    let caught: unknown;
    try {
      pkcs10Pem({ commonName: "x", organization: "y" }, pem);
    } catch (e) {
      caught = e;
    }
    expect(isLikenError(caught) && caught.code).toBe("LIKEN_AGENT_IDENTITY_UNAVAILABLE");
    expect((caught as Error).message).toMatch(/ec secp384r1.*remove the key file/);
  });

  it("encodes the public key it is given", () => {
    const { publicKey } = generateKeyPairSync("ec", { namedCurve: "prime256v1" });
    const info = requestInfo({ commonName: "a", organization: "b" }, publicKey);
    const spki = publicKey.export({ type: "spki", format: "der" });
    expect(info.includes(spki)).toBe(true);
  });
});
