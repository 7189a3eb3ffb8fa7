// The eviction check's pure parts: the rule (who may evict which pod when), the listen flag,
// the clientConfig the registration writes, and the certificate's names.
import { X509Certificate } from "node:crypto";
import { describe, expect, it } from "vitest";
import type { Cluster, Machine, RebootTurn } from "../../src/api/index.js";
import { issueTlsMaterial, uncoveredHosts } from "../../src/operator/webhook/certs.js";
import { parseListen } from "../../src/operator/webhook/index.js";
import { servingHosts } from "../../src/operator/webhook/names.js";
import {
  desiredClientConfig,
  recordUrlAsApplied,
} from "../../src/operator/webhook/registration.js";
import { reviewEviction, type EvictionFacts } from "../../src/operator/webhook/review.js";

const machine = (name: string, nodeName = name): Machine => ({
  apiVersion: "liken.sh/v1alpha1",
  kind: "Machine",
  metadata: { name },
  spec: { cluster: "lab", nodeName },
});

const turn = (m: string): RebootTurn => ({
  machine: m,
  grantedAt: "2026-12-03T08:00:00Z",
  grantedBy: "operator-1",
  leader: false,
  version: "2026.10.12-001",
});

const cluster = (turns: string[]): Cluster => ({
  apiVersion: "liken.sh/v1alpha1",
  kind: "Cluster",
  metadata: { name: "lab" },
  spec: { releases: { source: "https://releases.liken.sh" } },
  status: { rebootTurns: turns.map(turn) },
});

const base: EvictionFacts = {
  username: "liken:machine:node-a",
  pod: "web/w-1",
  podNode: "node-a",
  machine: machine("node-a"),
  cluster: cluster(["node-a"]),
};

describe("reviewEviction", () => {
  const cases: [string, Partial<EvictionFacts>, string | true, number?, string?][] = [
    ["its own node, its turn", {}, true],
    ["its own node, its turn among others", { cluster: cluster(["node-c", "node-a"]) }, true],
    [
      "another node, even with a turn",
      { podNode: "node-b" },
      "OtherNode",
      403,
      "liken:machine:node-a may evict only pods on its own node node-a, not pod web/w-1 on node node-b",
    ],
    [
      "an unscheduled pod",
      { podNode: "" },
      "OtherNode",
      403,
      "not pod web/w-1 on no node (unscheduled)",
    ],
    [
      "its own node, no turn at all",
      { cluster: cluster([]) },
      "NoTurn",
      403,
      "liken:machine:node-a may not evict pod web/w-1 on node node-a: Machine node-a holds no reboot turn in Cluster lab (turns held: none)",
    ],
    [
      "its own node, another machine's turn",
      { cluster: cluster(["node-b"]) },
      "NoTurn",
      403,
      "(turns held: node-b)",
    ],
    ["a Cluster with no status", { cluster: { ...cluster([]), status: undefined } }, "NoTurn"],
    ["no Cluster", { cluster: undefined }, "NoCluster", 403, "its Cluster lab does not exist"],
    ["no Machine", { machine: undefined }, "NoMachine", 403, "there is no Machine node-a"],
    [
      "a Machine whose node is another (its spec.nodeName rules)",
      { machine: machine("node-a", "node-b") },
      "OtherNode",
      403,
      "its own node node-b, not pod web/w-1 on node node-a",
    ],
    ["a pod that does not exist", { podNode: undefined }, "PodNotFound", 404],
    [
      "a member of liken:machines with another name",
      { username: "bob" },
      "NotAMachine",
      403,
      "user bob is in group liken:machines but is not named liken:machine:<machine>",
    ],
    ["an empty machine name", { username: "liken:machine:" }, "NotAMachine"],
  ];
  for (const [what, change, want, code, text] of cases) {
    it(what, () => {
      const v = reviewEviction({ ...base, ...change });
      if (want === true) {
        expect(v.allowed, v.message).toBe(true);
        return;
      }
      expect(v).toMatchObject({ allowed: false, reason: want, code: code ?? 403 });
      if (text !== undefined) expect(v.message).toContain(text);
    });
  }
});

describe("parseListen", () => {
  it.each([
    ["0.0.0.0:9443", "0.0.0.0", 9443],
    [":9443", "0.0.0.0", 9443],
    ["127.0.0.1:0", "127.0.0.1", 0],
    ["[::1]:8443", "::1", 8443],
  ])("%s", (text, host, port) => expect(parseListen(text)).toEqual({ host, port }));
  it.each(["9443", "host:", "h:70000", "h:x"])("refuses %s", (text) =>
    expect(() => parseListen(text)).toThrow(/is not host:port/),
  );
});

describe("desiredClientConfig", () => {
  it("names the Service by default, with the CA as caBundle", () => {
    expect(desiredClientConfig("CA", undefined)).toEqual({
      service: {
        name: "cluster-operator-webhook",
        namespace: "liken-system",
        path: "/validate-eviction",
        port: 443,
      },
      caBundle: Buffer.from("CA").toString("base64"),
    });
  });
  it("names only the URL in URL mode", () => {
    expect(desiredClientConfig("CA", "https://127.0.0.1:1234/validate-eviction")).toEqual({
      url: "https://127.0.0.1:1234/validate-eviction",
      caBundle: Buffer.from("CA").toString("base64"),
    });
  });
});

describe("the webhook's certificate", () => {
  it("is signed by its CA and names the Service and loopback", async () => {
    const m = await issueTlsMaterial(servingHosts(["10.1.2.3"]));
    const cert = new X509Certificate(m.cert);
    expect(cert.checkIssued(new X509Certificate(m.caCert))).toBe(true);
    expect(cert.verify(new X509Certificate(m.caCert).publicKey)).toBe(true);
    expect(uncoveredHosts(m.cert, servingHosts(["10.1.2.3"]))).toEqual([]);
    expect(cert.checkHost("cluster-operator-webhook.liken-system.svc")).toBeDefined();
    expect(uncoveredHosts(m.cert, ["127.0.0.1", "10.9.9.9", "elsewhere.example"])).toEqual([
      "10.9.9.9",
      "elsewhere.example",
    ]);
  });
});

describe("recordUrlAsApplied", () => {
  const LAST = "kubectl.kubernetes.io/last-applied-configuration";
  const applied = {
    webhooks: [
      { name: "other.example", clientConfig: { service: { name: "x" } } },
      {
        name: "eviction.liken.sh",
        clientConfig: { service: { name: "cluster-operator-webhook" } },
      },
    ],
  };
  it("makes kubectl's record name the URL, so a re-apply swaps it for the Service", () => {
    const vwc = { metadata: { annotations: { [LAST]: JSON.stringify(applied) } } };
    recordUrlAsApplied(vwc, "https://127.0.0.1:9/validate-eviction");
    const after = JSON.parse(vwc.metadata.annotations[LAST]) as typeof applied;
    expect(after.webhooks[1]!.clientConfig).toEqual({
      url: "https://127.0.0.1:9/validate-eviction",
    });
    expect(after.webhooks[0]).toEqual(applied.webhooks[0]);
  });
  it("leaves an object kubectl apply never wrote alone", () => {
    const vwc = { metadata: { annotations: { [LAST]: "not json" } } };
    recordUrlAsApplied(vwc, "https://127.0.0.1:9/");
    expect(vwc.metadata.annotations[LAST]).toBe("not json");
    const bare = { metadata: {} };
    recordUrlAsApplied(bare, "https://127.0.0.1:9/");
    expect(bare).toEqual({ metadata: {} });
  });
});
