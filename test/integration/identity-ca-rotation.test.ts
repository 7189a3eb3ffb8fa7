// A machine that already joined, after the cluster's client CA rotated
// (docs/adr/rejoin-after-ca-rotation.md), on the real control plane: its Machine reports a
// certificate valid for a day and that certificate's key digest, as its agent wrote them while
// it was trusted; the certificate itself is signed by a CA the API server does not trust (made
// here with openssl), which is what a rotation leaves. The agent gets 401s, joins again with the
// bootstrap credential and proves by the old key that it is the same machine; the real approver
// (as cluster-operator's ServiceAccount) approves it with a Normal Event, the controller
// manager's signer issues, without a person. The bootstrap token alone, or with a proof by any
// other key, is left for a person with its Event, and nothing is issued.
import { CertificatesV1Api } from "@kubernetes/client-node";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { Writable } from "node:stream";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadRestConfig, Rest } from "../../src/api/rest.js";
import { LikenApi } from "../../src/api/index.js";
import { keyDigest, rejoinAnnotations } from "../../src/api/rejoin-proof.js";
import { installIssued, writeKubeconfig } from "../../src/agent/identity/files.js";
import { MachineIdentity } from "../../src/agent/identity/identity.js";
import { newKey, requestCertificate, requestName } from "../../src/agent/identity/request.js";
import { CsrApprover } from "../../src/operator/csr/approver.js";
import {
  bootstrapToken,
  csrEventReasons,
  installIdentityRbac,
  readCsr,
  untrustedCertificate,
} from "../support/identity.js";
import {
  controlPlane,
  eventsWhere,
  kubeConfig,
  serviceAccountKubeConfig,
  uniqueName,
  waitFor,
} from "../support/kube.js";

const api = new LikenApi(kubeConfig());
const stop = new AbortController();
const machines: string[] = [];
let approver: CsrApprover;
let bootstrap: string;

beforeAll(async () => {
  await installIdentityRbac();
  bootstrap = (await bootstrapToken()).kubeconfig;
  // No --csr-node-label: the Machines below, created ahead, are what the fleet expects.
  approver = new CsrApprover(await serviceAccountKubeConfig("liken-system", "cluster-operator"), {
    autoApprove: true,
    leading: () => true,
    identity: "identity-ca-rotation-test",
    log: pino({ level: "warn" }),
    intervalMs: 500,
  });
  approver.start();
});

afterAll(async () => {
  stop.abort();
  await approver?.stop();
  for (const name of machines) await api.machines.delete(name).catch(() => undefined);
});

/**
 * A Machine that joined before the rotation: its certificate from the old CA (valid a day), and
 * its status as its agent reported them while the API server still accepted that certificate.
 */
async function joinedBeforeRotation(
  prefix: string,
): Promise<{ machine: string; certPem: string; keyPem: string }> {
  const machine = uniqueName(prefix);
  const old = untrustedCertificate(
    mkdtempSync(path.join(tmpdir(), "liken-old-ca-")),
    `liken:machine:${machine}`,
  );
  const m = await api.machines.create({
    apiVersion: "liken.sh/v1alpha1",
    kind: "Machine",
    metadata: { name: machine },
    spec: { cluster: uniqueName("rotated"), nodeName: machine },
  });
  machines.push(machine);
  const { X509Certificate } = await import("node:crypto");
  const notAfter = new Date(new X509Certificate(old.certPem).validTo).toISOString();
  await api.machines.replaceStatus({
    ...m,
    status: {
      certificateExpiry: notAfter.replace(/\.\d+Z$/, "Z"),
      certificateKeyDigest: keyDigest(old.keyPem),
    },
  });
  return { machine, ...old };
}

async function whoAmI(rest: Rest): Promise<string | undefined> {
  const r = await rest.request<{ status?: { userInfo?: { username?: string } } }>(
    "POST",
    "/apis/authentication.k8s.io/v1/selfsubjectreviews",
    {
      body: { apiVersion: "authentication.k8s.io/v1", kind: "SelfSubjectReview" },
      op: { verb: "create", kind: "SelfSubjectReview" },
    },
  );
  return r.status?.userInfo?.username;
}

/** The requests filed for `machine`, as the admin lists them. */
async function requestsFor(machine: string): Promise<string[]> {
  const list = await kubeConfig().makeApiClient(CertificatesV1Api).listCertificateSigningRequest();
  return list.items
    .map((c) => c.metadata?.name ?? "")
    .filter((n) => n.startsWith(`liken-${machine}-`));
}

describe("a machine that joined, after the cluster's client CA rotated", () => {
  it("rejoins by itself, proving by its old key that it is the same machine", async () => {
    const { machine, certPem, keyPem } = await joinedBeforeRotation("rotated");
    const lines: string[] = [];
    const log = pino(
      { level: "info" },
      new Writable({
        write(chunk: Buffer, _enc, done) {
          lines.push(chunk.toString());
          done();
        },
      }),
    );
    const dir = mkdtempSync(path.join(tmpdir(), "liken-rotated-"));
    const kubeconfig = path.join(dir, "kubeconfig");
    const user = `liken:machine:${machine}`;
    installIssued(dir, certPem, keyPem, Date.now());
    const cp = controlPlane();
    writeKubeconfig(kubeconfig, {
      server: cp.server,
      caData: readFileSync(cp.serverCaCert).toString("base64"),
      user,
    });
    const identity = new MachineIdentity(
      machine,
      {
        kubeconfig,
        bootstrapKubeconfig: bootstrap,
        expirationSeconds: 3600,
        approvalWarnMs: 60_000,
      },
      log,
    );
    await identity.ensure(stop.signal);
    expect(identity.status(Date.now())?.certificateKeyDigest).toBe(keyDigest(keyPem));
    const rest = new Rest(loadRestConfig(kubeconfig), "liken-test");
    let changes = 0;
    const renewing = identity.renewLoop(rest, stop.signal, () => changes++);
    let who: string | undefined;
    const beat = setInterval(() => {
      whoAmI(rest).then(
        (u) => (who = u),
        () => undefined,
      );
    }, 1000);
    try {
      await waitFor(
        "the machine back with a certificate the API server accepts",
        async () => {
          return changes > 0 && who === user;
        },
        { timeoutMs: 120_000, intervalMs: 500 },
      );
    } finally {
      clearInterval(beat);
    }
    // Approved by the approver, as a rejoin proven by the key the Machine reported.
    const [csr] = await requestsFor(machine);
    expect(csr).toBeDefined();
    const s = await readCsr(csr!);
    const approved = s.conditions.find((c) => c.type === "Approved");
    expect(approved?.reason).toBe("LikenMachineApproved");
    expect(approved?.message).toContain(`proving with the key ${keyDigest(keyPem)}`);
    await waitFor("the approver's Normal Event", async () =>
      (await csrEventReasons(csr!)).includes("CertificateRequestRejoined"),
    );
    const events = await eventsWhere(`involvedObject.name=${csr!}`);
    expect(events.find((e) => e.reason === "CertificateRequestRejoined")?.type).toBe("Normal");
    // The new identity: a new key, reported to the Machine from now on.
    const now = identity.status(Date.now())!;
    expect(now.condition).toMatchObject({ status: "True", reason: "Rejoined" });
    expect(now.certificateKeyDigest).not.toBe(keyDigest(keyPem));
    expect(lines.join("")).toContain("LIKEN_AGENT_IDENTITY_NOT_ACCEPTED");
    stop.abort();
    await renewing;
  }, 300_000);

  it.each<[string, "none" | "other-key", string]>([
    ["the bootstrap token alone", "none", "CertificateRequestAlreadyJoined"],
    [
      "the bootstrap token with a proof by another key",
      "other-key",
      "CertificateRequestRejoinKeyUnknown",
    ],
  ])(
    "%s does not take it over: left for a person, nothing issued",
    async (_, proof, reason) => {
      const { machine } = await joinedBeforeRotation("takeover");
      const keyPem = newKey();
      const annotations =
        proof === "none" ? undefined : rejoinAnnotations(machine, keyPem, newKey(), new Date());
      const asking = new AbortController();
      const filed = requestCertificate(new Rest(loadRestConfig(bootstrap), "liken-test"), {
        machine,
        keyPem,
        expirationSeconds: 3600,
        warnAfterMs: 60_000,
        log: pino({ level: "silent" }),
        signal: asking.signal,
        ...(annotations === undefined ? {} : { annotations }),
      }).catch((e: unknown) => e);
      const csr = requestName(machine, keyPem);
      try {
        await waitFor(`${csr} left with ${reason}`, async () =>
          (await csrEventReasons(csr)).includes(reason),
        );
      } finally {
        asking.abort();
        await filed;
      }
      const s = await readCsr(csr);
      expect(s.conditions.map((c) => c.type)).not.toContain("Approved");
      expect(s.certificate ?? "").toBe("");
      const events = await eventsWhere(`involvedObject.name=${csr}`);
      expect(events.find((e) => e.reason === reason)?.message).toContain("left for a person");
    },
    120_000,
  );
});
