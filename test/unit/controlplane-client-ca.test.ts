// The client CA files of a control plane whose client CA rotates (src/controlplane/certs.ts):
// they start as copies of the local CA, and a rotation leaves a new CA whose key matches its
// certificate, trusted alone by the bundle, while the local CA (the serving certificate's
// issuer) stays. openssl makes them, as for every control plane.
import { createPrivateKey, X509Certificate } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { makeCerts, rotateClientCa, separateClientCa } from "../../src/controlplane/certs.js";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe("a control plane's rotatable client CA", () => {
  it("starts as the local CA, and after a rotation is a new CA alone, the local CA untouched", () => {
    const dir = mkdtempSync(path.join(tmpdir(), "liken-client-ca-"));
    dirs.push(dir);
    const certs = makeCerts(dir);
    const local = readFileSync(certs.caCert, "utf8");
    const files = separateClientCa(certs, dir);
    expect(readFileSync(files.bundle, "utf8")).toBe(local);
    expect(readFileSync(files.signerCert, "utf8")).toBe(local);
    expect(readFileSync(files.signerKey, "utf8")).toBe(readFileSync(certs.caKey, "utf8"));

    const pem = rotateClientCa(files, "liken-rotated-test");
    const next = new X509Certificate(pem);
    expect(next.subject).toBe("CN=liken-rotated-test");
    expect(next.ca).toBe(true);
    expect(pem).not.toBe(local);
    expect(readFileSync(files.bundle, "utf8")).toBe(pem);
    expect(readFileSync(files.signerCert, "utf8")).toBe(pem);
    expect(next.checkPrivateKey(createPrivateKey(readFileSync(files.signerKey)))).toBe(true);
    // The serving certificate's CA, which every client checks the server against, stays.
    expect(readFileSync(certs.caCert, "utf8")).toBe(local);
    expect(new X509Certificate(readFileSync(certs.servingCert)).checkIssued(next)).toBe(false);
    // Nothing left beside the files it replaced.
    expect(readdirSync(dir).filter((f) => f.startsWith("rotate-"))).toEqual([]);
  });
});
