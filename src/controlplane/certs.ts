// Certificates and keys of a local control plane, made with the openssl command line:
// one CA that signs the API server's serving certificate and every client certificate
// (tests mint real identities with it), and the service-account signing key pair.
import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
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
      c.caKey,
      "-out",
      c.caCert,
      "-days",
      "3650",
      "-subj",
      "/CN=liken-local-ca",
    ],
    "create the local CA",
  );
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
