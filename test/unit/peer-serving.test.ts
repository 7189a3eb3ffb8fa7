// Which releases an agent serves to its peers: table tests of the pure decider.
import { describe, expect, it } from "vitest";
import { assignedPeers, planServing } from "../../src/agent/peer-serving.js";
import { downloadArgv } from "../../src/agent/download.js";
import type { Cluster, SlotStatus } from "../../src/api/types.js";

const A = { version: "2026.10.10-001", digest: `sha256:${"a".repeat(64)}` };
const B = { version: "2026.10.11-001", digest: `sha256:${"b".repeat(64)}` };
const ROOT = `sha256:${"c".repeat(64)}`;

function cluster(spec: Partial<Cluster["spec"]>, status?: Cluster["status"]): Cluster {
  return {
    apiVersion: "liken.sh/v1alpha1",
    kind: "Cluster",
    metadata: { name: "lab" },
    spec: { releases: { source: "https://r", catalog: [A] }, peers: { enabled: true }, ...spec },
    ...(status === undefined ? {} : { status }),
  };
}

const at = { port: 7450 };
const slot = (name: "a" | "b", state: SlotStatus["state"], r = A): SlotStatus => ({
  name,
  state,
  ...r,
});

describe("planServing", () => {
  it.each([
    [
      "peers off by default",
      cluster({ peers: undefined }),
      at,
      [slot("a", "Active")],
      "PeersDisabled",
    ],
    ["agent.yaml peersAddress off", cluster({}), undefined, [slot("a", "Active")], "AddressOff"],
    ["a slot being written", cluster({}), at, [slot("a", "Writing")], "NothingToServe"],
    ["a bad slot", cluster({}), at, [slot("a", "Bad")], "NothingToServe"],
    ["a withdrawn slot", cluster({}), at, [slot("a", "Withdrawn")], "NothingToServe"],
    ["an inactive (previous) slot", cluster({}), at, [slot("a", "Inactive")], "NothingToServe"],
    ["a release the catalog dropped", cluster({}), at, [slot("a", "Staged", B)], "NothingToServe"],
    [
      "a catalog version with another digest",
      cluster({}),
      at,
      [slot("a", "Active", { version: A.version, digest: B.digest })],
      "NothingToServe",
    ],
  ] as const)("serves nothing: %s", (_n, c, address, slots, reason) => {
    expect(planServing({ cluster: c, address, slots: [...slots] })).toEqual({
      kind: "off",
      reason,
    });
  });

  it("serves the running and the staged release, once each, at the Cluster's rate", () => {
    const c = cluster({
      releases: { source: "https://r", catalog: [A, B] },
      peers: { enabled: true, maxUploadBytesPerSecond: 2 * 1024 * 1024 },
    });
    expect(
      planServing({
        cluster: c,
        address: at,
        slots: [slot("a", "Active"), slot("b", "Staged", B)],
      }),
    ).toEqual({ kind: "serve", at, releases: [A, B], bytesPerSecond: 2 * 1024 * 1024 });
    expect(
      planServing({ cluster: c, address: at, slots: [slot("a", "Active"), slot("b", "Trial")] }),
    ).toEqual({ kind: "serve", at, releases: [A], bytesPerSecond: 2 * 1024 * 1024 });
  });

  it("defaults the rate to 50 MiB/s", () => {
    const p = planServing({ cluster: cluster({}), address: at, slots: [slot("a", "Active")] });
    expect(p).toMatchObject({ kind: "serve", bytesPerSecond: 50 * 1024 * 1024 });
  });

  it("channel mode serves the signed channel's target, not another uncatalogued release", () => {
    const c = cluster(
      {
        version: B.version,
        releases: {
          source: "https://r",
          trust: { mode: "channel", channel: "stable", rootDigest: ROOT },
        },
      },
      { trust: { rootDigest: ROOT, target: B } } as Cluster["status"],
    );
    expect(planServing({ cluster: c, address: at, slots: [slot("a", "Staged", B)] })).toMatchObject(
      { kind: "serve", releases: [B] },
    );
    expect(planServing({ cluster: c, address: at, slots: [slot("a", "Active", A)] })).toEqual({
      kind: "off",
      reason: "NothingToServe",
    });
  });
});

describe("assignedPeers", () => {
  const P = ["http://10.0.0.8:7450/", "http://10.0.0.9:7450/"];
  const withSources = (enabled: boolean, digest: string) =>
    cluster({ peers: { enabled } }, {
      peerSources: [{ machine: "node-4", digest, peers: P }],
    } as Cluster["status"]);

  it.each([
    ["its assignment for this release", withSources(true, A.digest), "node-4", P],
    ["nothing for another machine", withSources(true, A.digest), "node-5", []],
    [
      "nothing from a stale assignment (another release)",
      withSources(true, B.digest),
      "node-4",
      [],
    ],
    ["nothing while peers are off", withSources(false, A.digest), "node-4", []],
    ["nothing without a Cluster", undefined, "node-4", []],
  ] as const)("%s", (_n, c, machine, want) => {
    expect(assignedPeers(c, machine, A)).toEqual(want);
  });

  it("refuses an assigned peer that is not http://<IP>:<port>/, and says so", () => {
    const c = cluster({ peers: { enabled: true } }, {
      peerSources: [
        {
          machine: "node-4",
          digest: A.digest,
          peers: [
            "http://169.254.169.254:8080/",
            "http://10.0.0.8:7450/",
            "http://evil.example:8080/",
          ],
        },
      ],
    } as Cluster["status"]);
    const refused: string[] = [];
    expect(assignedPeers(c, "node-4", A, (url, why) => refused.push(`${url}: ${why}`))).toEqual([
      "http://10.0.0.8:7450/",
    ]);
    expect(refused).toEqual([
      "http://169.254.169.254:8080/: host 169.254.169.254 is link-local, unspecified or multicast: no Node's address",
      "http://evil.example:8080/: host evil.example is a name, not a Node's IP address",
    ]);
  });
});

describe("downloadArgv", () => {
  it("passes each assigned peer as --peer, in order, after the channel's arguments", () => {
    const base = {
      config: "/etc/liken/agent.yaml",
      source: "https://r",
      release: A,
      running: "a" as const,
    };
    expect(downloadArgv(base)).not.toContain("--peer");
    expect(downloadArgv({ ...base, peers: ["http://p1/", "http://p2/"] }).slice(-4)).toEqual([
      "--peer",
      "http://p1/",
      "--peer",
      "http://p2/",
    ]);
  });
});
