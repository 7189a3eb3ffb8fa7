// The first join proves the certificate it is given, as a renewal does (docs/machine.md,
// "Identity"): a certificate that does not carry the public half of the key the machine made
// is never installed, whoever put it in the request's status. On the real control plane: the
// agent's MachineIdentity files its request with the fleet's bootstrap token, and the admin
// writes another key's certificate (minted by the cluster's client CA, for the right name)
// into the request's status, as a wrong signer or a hostile approver with that right could.
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { tempDir } from "../support/temp-dir.js";
import { loadRestConfig, Rest } from "../../src/api/rest.js";
import { CURRENT } from "../../src/agent/identity/files.js";
import {
  bootstrapToken,
  capturedLog,
  CSR_PATH,
  installIdentityRbac,
  machineIdentity,
} from "../support/identity.js";
import { controlPlane, mintClientCert, uniqueName, waitFor } from "../support/kube.js";

const stop = new AbortController();
afterAll(() => stop.abort());

describe("the first join", () => {
  it("refuses a certificate that does not match the key it made, and installs nothing", async () => {
    await installIdentityRbac();
    const { kubeconfig: bootstrap } = await bootstrapToken();
    const machine = uniqueName("proof");
    const dir = tempDir("liken-join-proof-");
    const { log, lines } = capturedLog();
    const identity = machineIdentity(machine, path.join(dir, "kubeconfig"), bootstrap, log);
    const joined = identity.ensure(stop.signal).then(
      () => "joined",
      (e: unknown) => `stopped: ${String(e)}`,
    );

    // No approver runs here: the request stays pending until the admin writes a certificate.
    const admin = new Rest(loadRestConfig(controlPlane().kubeconfig), "liken-test");
    const name = await waitFor(`${machine}'s request`, async () => {
      const list = await admin.request<{ items: { metadata: { name: string } }[] }>(
        "GET",
        CSR_PATH,
        { op: { verb: "list", kind: "CertificateSigningRequest" } },
      );
      return list.items.map((c) => c.metadata.name).find((n) => n.startsWith(`liken-${machine}-`));
    });
    const other = mintClientCert({ user: `liken:machine:${machine}`, groups: ["liken:machines"] });
    const csr = await admin.request<Record<string, unknown> & { status?: object }>(
      "GET",
      `${CSR_PATH}/${name}`,
      { op: { verb: "get", kind: "CertificateSigningRequest", name } },
    );
    await admin.request("PUT", `${CSR_PATH}/${name}/status`, {
      body: {
        ...csr,
        status: {
          ...csr.status,
          certificate: readFileSync(other.certFile).toString("base64"),
        },
      },
      op: { verb: "update", kind: "CertificateSigningRequest", name },
    });

    await waitFor(
      "the agent's refusal of the certificate",
      async () =>
        lines.some((l) => l.includes("does not carry the public half of the key")) ||
        (await Promise.race([joined, Promise.resolve(undefined)])) !== undefined,
      { timeoutMs: 60_000 },
    );
    expect(lines.join("")).toContain("does not carry the public half of the key this machine made");
    expect(lines.join("")).toContain("LIKEN_AGENT_IDENTITY_REFUSED");
    expect(existsSync(path.join(dir, CURRENT))).toBe(false);
    stop.abort();
    expect(await joined).toMatch(/^stopped/);
  }, 120_000);
});
