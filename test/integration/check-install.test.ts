// `liken check-install` on the real API server: an operator image the nodes cannot pull is
// said at once, with the image and how to set it, not after a wait that can only time out
// (issue 42, item 9). No kubelet runs here: the pod's status is written as a kubelet writes it
// for an image it cannot get (state.waiting.reason ImagePullBackOff).
import { execFile } from "node:child_process";
import { AppsV1Api, CoreV1Api } from "@kubernetes/client-node";
import { afterAll, describe, expect, it } from "vitest";
import { likenEntry } from "../../src/cli/entry.js";
import { kubeConfig, kubeconfigPath, uniqueName } from "../support/kube.js";

const kc = kubeConfig();
const core = kc.makeApiClient(CoreV1Api);
const apps = kc.makeApiClient(AppsV1Api);
const namespaces: string[] = [];
const IMAGE = "registry.invalid/liken:0.1.0";
const LABELS = { "app.kubernetes.io/name": "cluster-operator" };

afterAll(async () => {
  for (const name of namespaces) await core.deleteNamespace({ name }).catch(() => undefined);
});

async function namespace(): Promise<string> {
  const name = uniqueName("install");
  await core.createNamespace({ body: { metadata: { name } } });
  namespaces.push(name);
  return name;
}

function liken(
  args: string[],
): Promise<{ code: number; stdout: string; stderr: string; ms: number }> {
  const t0 = Date.now();
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [likenEntry(), ...args, "--kubeconfig", kubeconfigPath()],
      { timeout: 120_000 },
      (e, stdout, stderr) =>
        resolve({
          code: e === null ? 0 : Number(e.code ?? 1),
          stdout,
          stderr,
          ms: Date.now() - t0,
        }),
    );
  });
}

describe("liken check-install", () => {
  it("says at once that the nodes cannot pull the operator image, and how to set it", async () => {
    const ns = await namespace();
    await apps.createNamespacedDeployment({
      namespace: ns,
      body: {
        metadata: { name: "cluster-operator", labels: LABELS },
        spec: {
          replicas: 0,
          selector: { matchLabels: LABELS },
          template: {
            metadata: { labels: LABELS },
            spec: { containers: [{ name: "cluster-operator", image: IMAGE }] },
          },
        },
      },
    });
    await core.createNamespacedPod({
      namespace: ns,
      body: {
        metadata: { name: "cluster-operator-0", labels: LABELS },
        // On no node: kwok (which plays the kubelet of its fake nodes) must not run it.
        spec: {
          nodeSelector: { "liken.test/no-such-node": "true" },
          containers: [{ name: "cluster-operator", image: IMAGE }],
        },
      },
    });
    // The scheduler writes the pod's status too (PodScheduled False): read, write, and again
    // on a conflict.
    for (let attempt = 1; ; attempt++) {
      try {
        const pod = await core.readNamespacedPod({ name: "cluster-operator-0", namespace: ns });
        await core.replaceNamespacedPodStatus({
          name: "cluster-operator-0",
          namespace: ns,
          body: {
            ...pod,
            status: {
              phase: "Pending",
              containerStatuses: [
                {
                  name: "cluster-operator",
                  image: IMAGE,
                  imageID: "",
                  ready: false,
                  restartCount: 0,
                  state: {
                    waiting: {
                      reason: "ImagePullBackOff",
                      message: `Back-off pulling image "${IMAGE}"`,
                    },
                  },
                },
              ],
            },
          },
        });
        break;
      } catch (e) {
        if (attempt >= 10 || !String(e).includes("HTTP-Code: 409")) throw e;
      }
    }
    const r = await liken(["check-install", "--namespace", ns, "--timeout", "90s"]);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stdout).toContain(`cluster-operator image: ${IMAGE}`);
    const lines = r.stderr.trim().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      /^liken: the nodes cannot pull the operator image registry\.invalid\/liken:0\.1\.0 \(pod cluster-operator-0: ImagePullBackOff/,
    );
    expect(lines[0]).toContain("kustomize `images:`");
    expect(lines[0]).toMatch(/\[LIKEN_CLI_IMAGE_UNPULLABLE\]$/);
    // Said on the first look, not at the end of --timeout.
    expect(r.ms).toBeLessThan(60_000);
  });

  it("names a missing install and the command that makes it", async () => {
    const ns = await namespace();
    const r = await liken(["check-install", "--namespace", ns]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(
      new RegExp(
        `^liken: no Deployment ${ns}/cluster-operator .*kubectl apply -k config/.*\\[LIKEN_CLI_INSTALL_NO_OPERATOR\\]\\n$`,
      ),
    );
  });
});
