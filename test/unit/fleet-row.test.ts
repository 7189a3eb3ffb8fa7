// The decisions of `liken fleet status` and of `--contexts`, as tables: what blocks a
// Cluster, what one row says, which contexts a command visits.
import { KubeConfig } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import type { Cluster, ClusterCondition, Machine } from "../../src/api/index.js";
import { chooseContexts, forContext, parseContextList } from "../../src/fleet/contexts.js";
import { failureText } from "../../src/fleet/read.js";
import { render } from "../../src/fleet/render.js";
import { LABEL_RING } from "../../src/api/index.js";
import { blockerOf, clusterRow, contextRows } from "../../src/fleet/row.js";

const T = "2026-12-05T09:00:00Z";
const cond = (type: string, status: string, reason: string, message = ""): ClusterCondition =>
  ({ type, status, reason, message, lastTransitionTime: T }) as ClusterCondition;

function cluster(o: { paused?: boolean; conditions?: ClusterCondition[]; ring?: string } = {}) {
  return {
    apiVersion: "liken.sh/v1alpha1",
    kind: "Cluster",
    metadata: { name: "store-1", ...(o.ring ? { labels: { [LABEL_RING]: o.ring } } : {}) },
    spec: {
      version: "2026.12.01-001",
      ...(o.paused === undefined ? {} : { rollout: { paused: o.paused } }),
    },
    status: { display: "Updating", conditions: o.conditions ?? [] },
  } as unknown as Cluster;
}

const machine = (name: string, cl: string, version?: string): Machine =>
  ({
    metadata: { name },
    spec: { cluster: cl, nodeName: name },
    ...(version ? { status: { version } } : {}),
  }) as unknown as Machine;

describe("blockerOf", () => {
  const cases: [string, Parameters<typeof cluster>[0], string][] = [
    [
      "nothing holds a rollout in progress",
      { conditions: [cond("Progressing", "True", "RolloutProgressing")] },
      "",
    ],
    ["a complete rollout", { conditions: [cond("Progressing", "True", "RolloutComplete")] }, ""],
    [
      "a stalled rollout, with the condition's message",
      {
        conditions: [cond("Progressing", "False", "RolloutStalled", "m1 did not come back\nmore")],
      },
      "RolloutStalled: m1 did not come back",
    ],
    [
      "a hold that reads True (approval)",
      { conditions: [cond("Progressing", "True", "WaitingForApproval", "m2 waits")] },
      "WaitingForApproval: m2 waits",
    ],
    [
      "a pause, said once though Progressing says it too",
      { paused: true, conditions: [cond("Progressing", "True", "RolloutPaused", "paused")] },
      "paused (liken rollout resume)",
    ],
    ["a pause the operator has not seen yet", { paused: true }, "paused (liken rollout resume)"],
    [
      "a channel that cannot be read",
      { conditions: [cond("ChannelReachable", "False", "ChannelUnreachable")] },
      "ChannelReachable ChannelUnreachable",
    ],
    [
      "an untrusted channel and a revert in force",
      {
        conditions: [
          cond("ChannelTrusted", "False", "SignatureThreshold"),
          cond("Reverted", "True", "RevertedByRequest"),
        ],
      },
      "ChannelTrusted SignatureThreshold; Reverted RevertedByRequest",
    ],
    [
      "a refused status write",
      { conditions: [cond("StatusWriteRefused", "True", "StatusInvalid")] },
      "StatusWriteRefused StatusInvalid",
    ],
    [
      "conditions in their good state",
      {
        conditions: [
          cond("ChannelReachable", "True", "ChannelRead"),
          cond("Reverted", "False", "RevertEnded"),
          cond("StatusWriteRefused", "False", "StatusAccepted"),
        ],
      },
      "",
    ],
  ];
  it.each(cases)("%s", (_why, o, want) => {
    expect(blockerOf(cluster(o))).toBe(want);
  });
});

describe("clusterRow", () => {
  it("counts the Cluster's own machines on its release, and reads the ring label", () => {
    const ms = [
      machine("a", "store-1", "2026.12.01-001"),
      machine("b", "store-1", "2026.11.01-001"),
      machine("c", "store-1"),
      machine("d", "other", "2026.12.01-001"),
    ];
    expect(clusterRow("ctx", cluster({ ring: "canary" }), ms)).toMatchObject({
      context: "ctx",
      cluster: "store-1",
      ring: "canary",
      release: "2026.12.01-001",
      onRelease: 1,
      machines: 3,
      phase: "Updating",
      blocker: "",
    });
  });
  it("a Cluster without the ring label has an empty ring; a context without Clusters one row", () => {
    expect(clusterRow("ctx", cluster(), []).ring).toBe("");
    expect(contextRows("ctx", [], [])).toEqual([{ context: "ctx", empty: true }]);
  });
});

describe("contexts", () => {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: "c", server: "https://127.0.0.1:1", skipTLSVerify: false }],
    users: [{ name: "u" }],
    contexts: ["a", "b", "c"].map((n) => ({ name: n, cluster: "c", user: "u" })),
    currentContext: "a",
  });
  it("parses a list, ignoring spaces, empty entries and repeats", () => {
    expect(parseContextList(" a, b,,a ,")).toEqual(["a", "b"]);
  });
  it("visits every context without --contexts, and the ones asked in their order", () => {
    expect(chooseContexts(kc, undefined)).toEqual(["a", "b", "c"]);
    expect(chooseContexts(kc, ["c", "a"])).toEqual(["c", "a"]);
  });
  it("refuses a name the kubeconfig lacks, and an empty list, with LIKEN_FLEET_NO_CONTEXT", () => {
    expect(() => chooseContexts(kc, ["a", "x"])).toThrow(
      /--contexts names x, which the kubeconfig does not have \(it has 3: a, b, c\)/,
    );
    expect(() => chooseContexts(kc, [])).toThrow(/names no context/);
    expect(() => chooseContexts(new KubeConfig(), undefined)).toThrow(/has no context/);
  });
  it("gives each context its own KubeConfig and leaves the loaded one as it was", () => {
    expect(forContext(kc, "b").getCurrentContext()).toBe("b");
    expect(kc.getCurrentContext()).toBe("a");
  });
});

describe("failureText and render", () => {
  it("says a timeout as such, and an error with its cause and code once", () => {
    expect(failureText(new Error("aborted"), 3000, true)).toBe("no answer within 3s");
    const e = new Error("request failed", {
      cause: Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:1"), { code: "ECONNREFUSED" }),
    });
    expect(failureText(e, 3000, false)).toBe("request failed: connect ECONNREFUSED 127.0.0.1:1");
  });
  it("counts the contexts that answered in the table and in the document", () => {
    const rows = [
      clusterRow("a", cluster({ ring: "canary" }), []),
      { context: "b", unreachable: "no answer within 3s" },
      { context: "c", empty: true as const },
    ];
    const table = render(rows, "table");
    expect(table.split("\n")[2]).toMatch(/^b\s+-\s+-\s+-\s+-\s+NOT REACHED\s+no answer within 3s$/);
    expect(table).toContain("2 of 3 contexts answered");
    expect(JSON.parse(render(rows, "json"))).toMatchObject({ contexts: 3, reached: 2 });
  });
});
