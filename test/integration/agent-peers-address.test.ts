// The operator hands a holder out at its Node's address, never at the URL its Machine status
// names (docs/peers.md, "Which address is handed out"): on the real control plane with the real
// operator and agents, the first machine stages the new release and serves it, advertising
// 127.0.0.1; its Node then says its InternalIP is 127.0.0.2 (as a kubelet or a cloud provider
// would), and the assignment of the second machine names 127.0.0.2 with the advertised port.
import { CoreV1Api } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { kubeConfig, waitFor } from "../support/kube.js";
import { firstServes, peersFleet } from "./peers-support.js";

const tag = Date.now().toString(36);
const M1 = `pa1-${tag}`;
const M2 = `pa2-${tag}`;

describe("the address a holder is handed out at", () => {
  const { fleet, next } = peersFleet();

  it("is its Node's address and the port it serves on, not what its status says", async () => {
    const v2 = next();
    const first = await firstServes(fleet, M1, v2);
    const port = new URL(first.url).port;
    expect(first.url).toBe(`http://127.0.0.1:${port}/`);

    const core = kubeConfig().makeApiClient(CoreV1Api);
    const node = await core.readNode({ name: M1 });
    node.status = { ...node.status, addresses: [{ type: "InternalIP", address: "127.0.0.2" }] };
    await core.replaceNodeStatus({ name: M1, body: node });

    await fleet.addMachine({ name: M2, role: "Worker", rebootPolicy: "Manual" });
    const assigned = await waitFor(
      `the operator assigns ${M1} at its Node's address to ${M2}`,
      async () => {
        const c = await fleet.api.clusters.get(fleet.cluster);
        const s = c.status?.peerSources?.find((x) => x.machine === M2 && x.digest === v2.digest);
        return s?.peers[0] === `http://127.0.0.2:${port}/` ? s : undefined;
      },
      { timeoutMs: 120_000 },
    );
    expect(assigned.peers).not.toContain(first.url);
  }, 360_000);
});
