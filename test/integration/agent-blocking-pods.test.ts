// The blocking pods against the real API server (blocking-pods.ts over the lean REST client):
// a pod that matches an entry of spec.disruption.blockingPods and runs on this node holds the
// turn and is named; one on another node, a finished one, or none does not; every namespace
// when the entry names none; a list the server refuses holds the turn too, with the reason.
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Rest, loadRestConfig } from "../../src/api/rest.js";
import type { BlockingPods as Spec, Cluster } from "../../src/api/types.js";
import { BlockingPods } from "../../src/agent/blocking-pods.js";
import { kubeconfigPath, kubectl, uniqueName, waitFor } from "../support/kube.js";
import { dropKwokPods, kwokPods } from "../support/kwok-pods.js";

const NODE = uniqueName("bp-node");
const OTHER = uniqueName("bp-other");
const NS = uniqueName("bp");

const clusterWith = (blockingPods: Spec[]): Cluster => ({
  apiVersion: "liken.sh/v1alpha1",
  kind: "Cluster",
  metadata: { name: "c" },
  spec: { releases: { source: "http://127.0.0.1:1" }, disruption: { blockingPods } },
});

describe("blocking pods on the real API server", () => {
  let clock = 0;
  const fresh = () =>
    new BlockingPods({
      rest: new Rest(loadRestConfig(kubeconfigPath()), "blocking-pods-test"),
      nodeName: NODE,
      log: pino({ level: "silent" }),
      now: () => clock,
    });

  beforeAll(async () => {
    await kwokPods(
      NS,
      [NODE, OTHER],
      [
        { name: "backup-1", node: NODE, labels: { app: "backup" } },
        { name: "backup-2", node: OTHER, labels: { app: "backup" } },
        { name: "web-1", node: NODE, labels: { app: "web" } },
      ],
    );
  }, 120_000);
  afterAll(async () => {
    await dropKwokPods(NS, [NODE, OTHER]);
  });

  it("names a matching pod on this node; one on another node does not count", async () => {
    const b = fresh();
    const c = clusterWith([{ namespace: NS, selector: { matchLabels: { app: "backup" } } }]);
    expect(await b.look(c, true)).toEqual({
      pods: [`${NS}/backup-1`],
      why: `no turn asked while ${NS}/backup-1 runs on this node (spec.disruption.blockingPods)`,
    });
    // Not looked at while the machine does not wait to ask.
    expect(await b.look(c, false)).toBeUndefined();
  });

  it("every namespace when the entry names none; set-based selectors; none matching holds nothing", async () => {
    const b = fresh();
    const any = clusterWith([
      { selector: { matchExpressions: [{ key: "app", operator: "In", values: ["web"] }] } },
    ]);
    expect((await b.look(any, true))?.pods).toEqual([`${NS}/web-1`]);
    clock += 60_000;
    const none = clusterWith([{ namespace: NS, selector: { matchLabels: { app: "nightly" } } }]);
    expect(await b.look(none, true)).toBeUndefined();
  });

  it("looks again only after its interval; a pod that left frees the turn", async () => {
    const b = fresh();
    const c = clusterWith([{ namespace: NS, selector: { matchLabels: { app: "web" } } }]);
    expect((await b.look(c, true))?.pods).toEqual([`${NS}/web-1`]);
    expect(
      (await kubectl(["delete", "pod", "-n", NS, "web-1", "--grace-period=0", "--force"])).code,
    ).toBe(0);
    await waitFor("web-1 gone", async () => {
      const r = await kubectl(["get", "pod", "-n", NS, "web-1"]);
      return r.code !== 0;
    });
    expect((await b.look(c, true))?.pods).toEqual([`${NS}/web-1`]); // the last look, kept
    clock += 30_000;
    expect(await b.look(c, true)).toBeUndefined();
  });

  it("a list the server refuses holds the turn and says why", async () => {
    const b = fresh();
    // A key the API server refuses to parse (the CRD refuses it when written; a Cluster written
    // under an older CRD may still carry one).
    const bad = clusterWith([
      {
        namespace: NS,
        selector: { matchExpressions: [{ key: "not a key!", operator: "Exists" }] },
      },
    ]);
    const got = await b.look(bad, true);
    expect(got?.pods).toEqual([]);
    expect(got?.why).toMatch(
      new RegExp(
        `^no turn asked: cannot list the pods of spec.disruption.blockingPods in namespace ${NS} \\(`,
      ),
    );
  });
});
