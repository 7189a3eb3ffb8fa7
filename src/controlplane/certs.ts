// Certificates and keys of a local control plane, made with the openssl command line:
// one CA that signs the API server's serving certificate and every client certificate
// (tests mint real identities with it), and the service-account signing key pair; and, for a
// control plane whose client CA a test rotates, client CA files of their own.
import { execFileSync } from "node:child_process";
import {
  chmodSync,
  copyFileSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import path from "node:path";
import { ControlPlaneError } from "./errors.js";

export interface ControlPlaneCerts {
  caCert: string;
  caKey: string;
  servingCert: string;
  servingKey: string;
  saKey: string;
  saPub: string;
}

function openssl(args: string[], what: string): void {
  try {
    execFileSync("openssl", args, { stdio: ["ignore", "ignore", "pipe"] });
  } catch (e) {
    const err = e as { code?: string; stderr?: Buffer };
    const detail =
      err.code === "ENOENT" ? "openssl is not installed" : (err.stderr?.toString().trim() ?? "");
    throw new ControlPlaneError(
      "LIKEN_CLUSTER_CERTS",
      `could not ${what}: ${detail}; install openssl (Debian: apt-get install openssl) and run again`,
      { cause: e },
    );
  }
}

/**
 * Subject alternative names of the serving certificate: loopback for the host, and
 * 10.0.2.2, the address at which a QEMU guest with user-mode networking reaches the host.
 */
const SERVING_SANS =
  "DNS:localhost,DNS:kubernetes,DNS:kubernetes.default.svc,IP:127.0.0.1,IP:10.0.2.2";

/** A self-signed P-256 CA for ten years, `cn` its subject, written to the two files. */
function makeCa(certFile: string, keyFile: string, cn: string): void {
  openssl(
    [
      "req",
      "-x509",
      "-newkey",
      "ec",
      "-pkeyopt",
      "ec_paramgen_curve:prime256v1",
      "-nodes",
      "-keyout",
      keyFile,
      "-out",
      certFile,
      "-days",
      "3650",
      "-subj",
      `/CN=${cn}`,
    ],
    `create the CA ${cn}`,
  );
}

export function makeCerts(dir: string): ControlPlaneCerts {
  const p = (f: string): string => path.join(dir, f);
  const c: ControlPlaneCerts = {
    caCert: p("ca.crt"),
    caKey: p("ca.key"),
    servingCert: p("apiserver.crt"),
    servingKey: p("apiserver.key"),
    saKey: p("sa.key"),
    saPub: p("sa.pub"),
  };
  makeCa(c.caCert, c.caKey, "liken-local-ca");
  openssl(
    [
      "req",
      "-newkey",
      "ec",
      "-pkeyopt",
      "ec_paramgen_curve:prime256v1",
      "-nodes",
      "-keyout",
      c.servingKey,
      "-out",
      p("apiserver.csr"),
      "-subj",
      "/CN=kube-apiserver",
    ],
    "create the API server's key",
  );
  writeFileSync(
    p("apiserver.ext"),
    `subjectAltName=${SERVING_SANS}\nextendedKeyUsage=serverAuth\n`,
  );
  openssl(
    [
      "x509",
      "-req",
      "-in",
      p("apiserver.csr"),
      "-CA",
      c.caCert,
      "-CAkey",
      c.caKey,
      "-CAcreateserial",
      "-out",
      c.servingCert,
      "-days",
      "3650",
      "-extfile",
      p("apiserver.ext"),
    ],
    "sign the API server's serving certificate",
  );
  openssl(
    ["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", c.saKey],
    "create the service-account key",
  );
  openssl(
    ["pkey", "-in", c.saKey, "-pubout", "-out", c.saPub],
    "write the service-account public key",
  );
  return c;
}

/** A client certificate for `user` in `groups` (CN and O), signed by the control plane's CA. */
export function mintClientCert(
  certs: Pick<ControlPlaneCerts, "caCert" | "caKey">,
  dir: string,
  user: string,
  groups: string[],
): { certFile: string; keyFile: string } {
  const safe = user.replace(/[^A-Za-z0-9_.-]/g, "_");
  const keyFile = path.join(dir, `${safe}.key`);
  const certFile = path.join(dir, `${safe}.crt`);
  const csr = path.join(dir, `${safe}.csr`);
  // openssl's -subj takes "/" separated RDNs; escape the separators a name may contain.
  const esc = (s: string): string => s.replace(/[/\\]/g, (m) => `\\${m}`);
  const subj = `/CN=${esc(user)}${groups.map((g) => `/O=${esc(g)}`).join("")}`;
  openssl(
    [
      "req",
      "-newkey",
      "ec",
      "-pkeyopt",
      "ec_paramgen_curve:prime256v1",
      "-nodes",
      "-keyout",
      keyFile,
      "-out",
      csr,
      "-subj",
      subj,
    ],
    `create a key for ${user}`,
  );
  writeFileSync(`${csr}.ext`, "extendedKeyUsage=clientAuth\n");
  openssl(
    [
      "x509",
      "-req",
      "-in",
      csr,
      "-CA",
      certs.caCert,
      "-CAkey",
      certs.caKey,
      "-CAcreateserial",
      "-out",
      certFile,
      "-days",
      "365",
      "-extfile",
      `${csr}.ext`,
    ],
    `sign a client certificate for ${user}`,
  );
  return { certFile, keyFile };
}

/**
 * The client CA of a control plane whose client CA can rotate (UpOptions.rotatableClientCa):
 * the bundle kube-apiserver trusts for client certificates (--client-ca-file) and the CA
 * kube-controller-manager's signers issue with (--cluster-signing-cert-file and -key-file),
 * files of their own, so that replacing them leaves the serving certificate, and every client
 * that checks it against the local CA, as they are. Both components reload these files when
 * they change (k8s.io/apiserver's dynamiccertificates: an fsnotify watch on each file).
 */
export interface ClientCaFiles {
  bundle: string;
  signerCert: string;
  signerKey: string;
}

/** Client CA files in `dir` that start as copies of the local CA. */
export function separateClientCa(
  certs: Pick<ControlPlaneCerts, "caCert" | "caKey">,
  dir: string,
): ClientCaFiles {
  const f: ClientCaFiles = {
    bundle: path.join(dir, "client-ca.crt"),
    signerCert: path.join(dir, "signer.crt"),
    signerKey: path.join(dir, "signer.key"),
  };
  copyFileSync(certs.caCert, f.bundle);
  copyFileSync(certs.caCert, f.signerCert);
  copyFileSync(certs.caKey, f.signerKey);
  chmodSync(f.signerKey, 0o600);
  return f;
}

/**
 * Rotates the client CA as a person withdrawing every client certificate at once does: a new
 * CA signs from now on, and the API server trusts it alone, so every certificate the old one
 * issued is refused (401) while still valid by its dates; tokens are untouched. The signer
 * first, so that a request approved meanwhile is issued by the CA the API server is about to
 * trust. Each file is replaced by a rename (a reader sees the old or the new one, never half);
 * a signer that reads the new key beside the old certificate rejects the pair and reads again
 * on the next file's event. Returns the new CA's certificate (PEM).
 */
export function rotateClientCa(files: ClientCaFiles, cn: string): string {
  const work = mkdtempSync(path.join(path.dirname(files.bundle), "rotate-"));
  try {
    const cert = path.join(work, "ca.crt");
    const key = path.join(work, "ca.key");
    makeCa(cert, key, cn);
    const pem = readFileSync(cert, "utf8");
    copyFileSync(cert, path.join(work, "bundle.crt"));
    renameSync(key, files.signerKey);
    renameSync(cert, files.signerCert);
    renameSync(path.join(work, "bundle.crt"), files.bundle);
    return pem;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
