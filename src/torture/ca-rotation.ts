// The fault `ca-rotated`: one machine meets what a rotation of the cluster's client CA does to
// it. Its current certificate is replaced by one for the same name and the same key, valid for
// a day, but signed by a CA the API server does not trust (made here with openssl), and its
// agent restarts on it: every request it makes is answered 401 while nothing about the
// certificate's dates asks for a renewal. The machine must come back by itself, proving by its
// key that it is the same machine (docs/adr/rejoin-after-ca-rotation.md).
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { installIssued, readHeld } from "../agent/identity/files.js";
import { agentUserName, AGENT_GROUP } from "../api/types.js";

/**
 * Re-signs the machine's current key by a CA nobody trusts and installs that certificate as
 * its current one (the same file layout the agent keeps). Returns the key's digest, which the
 * Machine keeps reporting until it rejoined, or undefined when the machine holds no
 * certificate yet.
 */
export function rotateAway(identityDir: string, machine: string): string | undefined {
  const held = readHeld(identityDir);
  if (held === undefined) return undefined;
  const work = mkdtempSync(path.join(tmpdir(), "liken-torture-ca-"));
  try {
    const pem = readFileSync(held.file, "utf8");
    const key = pem.slice(pem.indexOf("-----BEGIN PRIVATE KEY-----"));
    const keyFile = path.join(work, "held.key");
    writeFileSync(keyFile, key, { mode: 0o600 });
    const subject = `/O=${AGENT_GROUP}/CN=${agentUserName(machine)}`;
    const { certPem } = untrustedCertificate(work, subject, keyFile);
    installIssued(identityDir, certPem, key, Date.now());
    return held.keyDigest;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/**
 * A certificate for `subject` (an openssl -subj, e.g. /O=group/CN=user), valid for a day, signed
 * by a CA made in `dir` that no API server trusts; for the key in `keyFile` when given (the same
 * machine, another CA), else for a new P-256 key. Files are written to `dir`.
 */
export function untrustedCertificate(
  dir: string,
  subject: string,
  keyFile?: string,
): { certPem: string; keyPem: string } {
  const f = (n: string): string => path.join(dir, n);
  const ossl = (args: string[]): void => void execFileSync("openssl", args, { stdio: "pipe" });
  const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];
  const ca = ["-keyout", f("ca.key"), "-out", f("ca.crt"), "-days", "2", "-subj", "/CN=rogue"];
  ossl(["req", "-x509", ...ec, ...ca]);
  const key = keyFile ?? f("m.key");
  const request = keyFile === undefined ? [...ec, "-keyout", key] : ["-key", key];
  ossl(["req", "-new", ...request, "-subj", subject, "-out", f("m.csr")]);
  ossl([
    "x509",
    "-req",
    "-in",
    f("m.csr"),
    "-CA",
    f("ca.crt"),
    "-CAkey",
    f("ca.key"),
    "-CAcreateserial",
    "-days",
    "1",
    "-out",
    f("m.crt"),
  ]);
  return { certPem: readFileSync(f("m.crt"), "utf8"), keyPem: readFileSync(key, "utf8") };
}
