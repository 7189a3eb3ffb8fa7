// The machine's identity on its state partition (docs/machine.md, "Identity"), next to the
// kubeconfig the agent writes:
//
//   kubeconfig                     server, CA, and the client certificate and key below
//   liken-client-current.pem      -> liken-client-<ms>.pem (a symlink, swapped by rename)
//   liken-client-<ms>.pem          certificate and key in one file (mode 0600), as the kubelet
//                                  keeps kubelet-client-current.pem: a reader never sees a new
//                                  certificate with the old key
//   liken-client-pending.key       the key of a request in flight (0600); it never leaves
//
// Every write is a new file, synced, renamed into place and its directory synced, so a power
// cut leaves the old identity or the new one, never half of one.
import { X509Certificate } from "node:crypto";
import {
  closeSync,
  existsSync,
  fsyncSync,
  lstatSync,
  openSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeSync,
} from "node:fs";
import path from "node:path";
import { kubeconfigYaml } from "../../api/kubeconfig-doc.js";
import { keyDigest } from "../../api/rejoin-proof.js";
import type { CertTimes } from "./renewal.js";

export const CURRENT = "liken-client-current.pem";
export const PENDING_KEY = "liken-client-pending.key";
const ISSUED = /^liken-client-(\d+)\.pem$/;

function syncDir(dir: string): void {
  const fd = openSync(dir, "r");
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Writes `text` to `file` by a synced temporary file and a rename; mode 0600. */
export function writeAtomically(file: string, text: string): void {
  const tmp = `${file}.tmp-${process.pid}`;
  const fd = openSync(tmp, "w", 0o600);
  try {
    writeSync(fd, text);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, file);
  syncDir(path.dirname(file));
}

/** The certificate the agent authenticates with now, and its times; undefined when none. */
export interface Held extends CertTimes {
  file: string;
  subject: string;
  /** "sha256:<hex>" of the certificate's public key (status.certificateKeyDigest). */
  keyDigest: string;
}

export function readHeld(dir: string): Held | undefined {
  const link = path.join(dir, CURRENT);
  if (!existsSync(link)) return undefined;
  const target = path.resolve(dir, readlinkSync(link));
  const pem = readFileSync(target);
  const cert = new X509Certificate(pem);
  const issued = ISSUED.exec(path.basename(target));
  return {
    file: target,
    subject: cert.subject,
    keyDigest: keyDigest(cert.publicKey),
    notBeforeMs: Date.parse(cert.validFrom),
    notAfterMs: Date.parse(cert.validTo),
    issuedMs: issued ? Number(issued[1]) : lstatSync(target).mtimeMs,
  };
}

/**
 * Makes `certPem` with `keyPem` the current identity: a new file, then the symlink swapped.
 * The previous certificate's file stays (the one before it goes) so that a certificate
 * that turns out not to work can be switched back (identity.ts keeps the old until the new
 * one has answered).
 */
export function installIssued(dir: string, certPem: string, keyPem: string, nowMs: number): string {
  const file = path.join(dir, `liken-client-${nowMs}.pem`);
  writeAtomically(file, `${certPem.trim()}\n${keyPem.trim()}\n`);
  pointCurrentAt(dir, file);
  return file;
}

/** Swaps liken-client-current.pem to `file` (rename of a fresh symlink: atomic). */
export function pointCurrentAt(dir: string, file: string): void {
  const tmp = path.join(dir, `${CURRENT}.tmp-${process.pid}`);
  rmSync(tmp, { force: true });
  symlinkSync(path.basename(file), tmp);
  renameSync(tmp, path.join(dir, CURRENT));
  syncDir(dir);
}

/** Removes issued files older than the current one and the one before it. */
export function pruneIssued(dir: string): void {
  const current = readHeld(dir)?.file;
  const issued = readdirSync(dir)
    .map((f) => ISSUED.exec(f))
    .filter((m): m is RegExpExecArray => m !== null)
    .sort((a, b) => Number(b[1]) - Number(a[1]));
  const keep = new Set<string>();
  for (const m of issued) {
    if (keep.size >= 2) break;
    keep.add(m[0]);
  }
  if (current !== undefined) keep.add(path.basename(current));
  for (const m of issued) if (!keep.has(m[0])) rmSync(path.join(dir, m[0]), { force: true });
}

/** The kubeconfig the agent authenticates with: the pem as both certificate and key. */
export function writeKubeconfig(
  file: string,
  o: { server: string; caData?: string; tlsServerName?: string; user: string },
): void {
  const pem = path.join(path.dirname(file), CURRENT);
  const doc = kubeconfigYaml({
    cluster: "liken",
    server: o.server,
    user: o.user,
    credentials: { certFile: pem, keyFile: pem },
    caData: o.caData,
    tlsServerName: o.tlsServerName,
  });
  writeAtomically(file, doc);
}
