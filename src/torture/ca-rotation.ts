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
    const f = (n: string): string => path.join(work, n);
    const pem = readFileSync(held.file, "utf8");
    const key = pem.slice(pem.indexOf("-----BEGIN PRIVATE KEY-----"));
    writeFileSync(f("m.key"), key, { mode: 0o600 });
    const ossl = (args: string[]): void => void execFileSync("openssl", args, { stdio: "pipe" });
    const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];
    ossl([
      "req",
      "-x509",
      ...ec,
      "-keyout",
      f("ca.key"),
      "-out",
      f("ca.crt"),
      "-days",
      "2",
      "-subj",
      "/CN=rotated-away",
    ]);
    const subject = `/O=${AGENT_GROUP}/CN=${agentUserName(machine)}`;
    ossl(["req", "-new", "-key", f("m.key"), "-subj", subject, "-out", f("m.csr")]);
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
    installIssued(identityDir, readFileSync(f("m.crt"), "utf8"), key, Date.now());
    return held.keyDigest;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
