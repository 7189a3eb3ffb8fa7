// The CRDs on the real API server: every rule the server enforces, each with an object it
// accepts and one it refuses, and the message a person sees.
import { describe, expect, it } from "vitest";
import { LikenApi, type Cluster, type Machine } from "../../src/api/index.js";
import { SOURCE_PROBLEMS, sourceProblem } from "../../src/api/source-url.js";
import { kubeConfig, uniqueName } from "../support/kube.js";

const DIGEST_A = `sha256:${"a".repeat(64)}`;
const DIGEST_B = `sha256:${"b".repeat(64)}`;

function cluster(name: string, spec: Record<string, unknown>): Cluster {
  return {
    apiVersion: "liken.sh/v1alpha1",
    kind: "Cluster",
    metadata: { name },
    spec: {
      releases: {
        source: "https://releases.liken.sh",
        catalog: [{ version: "2026.10.10-001", digest: DIGEST_A }],
      },
      ...spec,
    } as Cluster["spec"],
  };
}

function machine(name: string, spec: Record<string, unknown>): Machine {
  return {
    apiVersion: "liken.sh/v1alpha1",
    kind: "Machine",
    metadata: { name },
    spec: { cluster: "lab", nodeName: name, ...spec } as Machine["spec"],
  };
}

const api = new LikenApi(kubeConfig());

/** Create with dryRun (nothing stays behind); resolve to the refusal, or undefined. */
async function refusal(obj: Cluster | Machine): Promise<string | undefined> {
  const client = obj.kind === "Cluster" ? api.clusters : api.machines;
  try {
    await (client as typeof api.clusters).create(obj as Cluster, { dryRun: true });
    return undefined;
  } catch (e) {
    expect(e).toMatchObject({ code: "LIKEN_API_INVALID", httpStatus: 422 });
    return (e as Error).message;
  }
}

describe("Cluster rules on the real API server", () => {
  it("spec.version must name a catalog entry; the message names it and the fix", async () => {
    expect(await refusal(cluster(uniqueName("c"), { version: "2026.10.10-001" }))).toBeUndefined();
    const msg = await refusal(cluster(uniqueName("c"), { version: "2026.10.12-001" }));
    expect(msg).toContain('spec.version "2026.10.12-001" names no entry in spec.releases.catalog');
    expect(msg).toContain('add {version: "2026.10.12-001"');
    expect(msg).toContain("to spec.releases.catalog");
  });

  it("spec.releases.source is refused for what is wrong with it, as the CLI refuses it", async () => {
    const withSource = (source: string): Cluster => {
      const c = cluster(uniqueName("c"), {});
      c.spec.releases.source = source;
      return c;
    };
    const cases: [string, string | undefined][] = [
      ["https://releases.liken.sh", undefined],
      ["http://10.0.0.1:8080/channel/", undefined],
      ["ftp://x", SOURCE_PROBLEMS.scheme],
      ["127.0.0.1:44337", SOURCE_PROBLEMS.scheme],
      ["https://releases.liken.sh/stable/channel.yaml", SOURCE_PROBLEMS.channelFile],
      ["http://:8080/x", SOURCE_PROBLEMS.notUrl],
      ["https://host/a b", SOURCE_PROBLEMS.notUrl],
    ];
    for (const [source, problem] of cases) {
      // The CLI's twin of the rule says the same of the same input.
      expect(sourceProblem(source), source).toBe(problem);
      const msg = await refusal(withSource(source));
      if (problem === undefined) expect(msg, source).toBeUndefined();
      else expect(msg ?? "(admitted)", source).toContain(problem);
    }
  });

  it("a cluster without a target is valid; an empty catalog with a target is not", async () => {
    expect(await refusal(cluster(uniqueName("c"), {}))).toBeUndefined();
    const c = cluster(uniqueName("c"), { version: "2026.10.10-001" });
    c.spec.releases.catalog = [];
    expect(await refusal(c)).toContain("names no entry in spec.releases.catalog");
    delete c.spec.releases.catalog;
    expect(await refusal(c)).toContain("names no entry in spec.releases.catalog");
  });

  it.each([
    ["uppercase hex", `sha256:${"A".repeat(64)}`],
    ["63 hex digits", `sha256:${"a".repeat(63)}`],
    ["another algorithm", `sha512:${"a".repeat(64)}`],
    ["no prefix", "a".repeat(64)],
  ])("a malformed digest (%s) is refused", async (_what, digest) => {
    const c = cluster(uniqueName("c"), {});
    c.spec.releases.catalog = [{ version: "2026.10.10-001", digest }];
    expect(await refusal(c)).toMatch(
      /spec\.releases\.catalog\[0\]\.digest.*should match '\^sha256:\[0-9a-f\]\{64\}\$'/,
    );
  });

  it("duplicate catalog versions are refused, distinct ones accepted", async () => {
    const c = cluster(uniqueName("c"), {});
    c.spec.releases.catalog = [
      { version: "2026.10.10-001", digest: DIGEST_A },
      { version: "2026.10.12-001", digest: DIGEST_B },
    ];
    expect(await refusal(c)).toBeUndefined();
    c.spec.releases.catalog[1]!.version = "2026.10.10-001";
    const msg = await refusal(c);
    expect(msg).toContain(
      'spec.releases.catalog[1]: Duplicate value: {"version":"2026.10.10-001"}',
    );
  });

  it.each([
    ["../../etc", "a path"],
    ["2026/10", "a slash"],
    ["x".repeat(65), "65 characters"],
  ])("a malformed version %j (%s) is refused", async (version) => {
    const c = cluster(uniqueName("c"), {});
    c.spec.releases.catalog = [{ version, digest: DIGEST_A }];
    expect(await refusal(c)).toContain("spec.releases.catalog[0].version");
  });

  it("a catalog entry's digest never changes: a rebuild is refused in the same edit", async () => {
    const c = await api.clusters.create(cluster(uniqueName("c"), { version: "2026.10.10-001" }));
    const name = c.metadata.name;
    try {
      const rebuilt = { version: "2026.10.10-001", digest: DIGEST_B };
      const err = await api.clusters
        .patch(name, { spec: { releases: { catalog: [rebuilt] } } })
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(err).toMatchObject({ code: "LIKEN_API_INVALID", httpStatus: 422 });
      const msg = (err as Error).message;
      expect(msg).toContain("spec.releases.catalog[0].digest");
      expect(msg).toContain(
        `the digest of version "2026.10.10-001" cannot change (it was ${DIGEST_A})`,
      );
      expect(msg).toContain("Publish the rebuilt release under a new version");
      // The way the message points to is accepted: a new version beside the old one.
      const next = { version: "2026.10.10-002", digest: DIGEST_B };
      await expect(
        api.clusters.patch(name, {
          spec: {
            version: next.version,
            releases: { catalog: [{ version: "2026.10.10-001", digest: DIGEST_A }, next] },
          },
        }),
      ).resolves.toMatchObject({ spec: { version: next.version } });
      // Removed in one edit and added back in another, the server has nothing to compare
      // with: accepted (the agent's side of that is steps.ts runsTargetVersion).
      await api.clusters.patch(name, { spec: { releases: { catalog: [next] } } });
      await expect(
        api.clusters.patch(name, { spec: { releases: { catalog: [next, rebuilt] } } }),
      ).resolves.toMatchObject({ spec: { releases: { catalog: [next, rebuilt] } } });
    } finally {
      await api.clusters.delete(name);
    }
  });

  it.each([[1], [3], ["1%"], ["10%"], ["100%"]])("maxUnavailable %j is accepted", async (v) => {
    expect(
      await refusal(cluster(uniqueName("c"), { disruption: { maxUnavailable: v } })),
    ).toBeUndefined();
  });

  it.each([[0], [-1], ["0%"], ["101%"], ["150%"], ["-5%"], ["ten"], ["10"]])(
    "maxUnavailable %j is refused with the rule",
    async (v) => {
      const msg = await refusal(cluster(uniqueName("c"), { disruption: { maxUnavailable: v } }));
      expect(msg).toContain(
        "spec.disruption.maxUnavailable must be an integer of at least 1 or a percentage from 1% to 100%",
      );
      expect(msg).toContain(typeof v === "string" ? `not "${v}"` : `not ${v}`);
    },
  );

  it("one reboot turn per machine: a second record for the same machine is refused", async () => {
    const c = await api.clusters.create(cluster(uniqueName("c"), {}));
    try {
      const record = {
        machine: "node-4",
        grantedAt: "2026-12-02T12:00:00Z",
        grantedBy: "operator-a",
        leader: false,
        version: "2026.10.10-001",
      };
      c.status = { rebootTurns: [record, { ...record, grantedBy: "operator-b" }] };
      await expect(api.clusters.replaceStatus(c)).rejects.toThrow(
        /status\.rebootTurns\[1\]: Duplicate value: \{"machine":"node-4"\}/,
      );
      c.status = { rebootTurns: [record] };
      await expect(api.clusters.replaceStatus(c)).resolves.toBeDefined();
    } finally {
      await api.clusters.delete(c.metadata.name);
    }
  });

  const win = (w: Record<string, unknown>) => ({
    disruption: { windows: [{ days: ["Sat"], start: "02:00", duration: "4h", ...w }] },
  });

  it.each([
    [{}],
    [{ duration: "90m" }],
    [{ duration: "1h30m", timeZone: "Europe/Berlin" }],
    [{ duration: "168h", days: ["Mon", "Sun"] }],
    [{ start: "23:59", duration: "1m" }],
  ])("maintenance window %j is accepted", async (w) => {
    expect(await refusal(cluster(uniqueName("c"), win(w)))).toBeUndefined();
  });

  it.each([
    [{ days: ["Saturday"] }, "spec.disruption.windows[0].days[0]"],
    [{ days: [] }, "spec.disruption.windows[0].days"],
    [{ start: "24:00" }, "spec.disruption.windows[0].start"],
    [{ start: "2:00" }, "spec.disruption.windows[0].start"],
    [{ duration: "4" }, 'duration "4" must be hours and/or minutes from 1m to 168h'],
    [{ duration: "1d" }, 'duration "1d" must be hours and/or minutes'],
    [{ duration: "0m" }, 'duration "0m" must be hours and/or minutes from 1m to 168h'],
    [{ duration: "169h" }, 'duration "169h" must be'],
    [{ timeZone: "Europe Berlin" }, "spec.disruption.windows[0].timeZone"],
  ])("maintenance window %j is refused, naming %s", async (w, want) => {
    expect(await refusal(cluster(uniqueName("c"), win(w)))).toContain(want);
  });

  const gate = (g: Record<string, unknown>) => ({
    health: {
      pods: [{ namespace: "kube-system", selector: { matchLabels: { app: "cni" } }, ...g }],
    },
  });

  it.each([
    [{}],
    [{ selector: { matchExpressions: [{ key: "app", operator: "In", values: ["cni"] }] } }],
    [{ selector: { matchExpressions: [{ key: "managed", operator: "Exists" }] } }],
  ])("health gate %j is accepted", async (g) => {
    expect(await refusal(cluster(uniqueName("c"), gate(g)))).toBeUndefined();
  });

  it.each([
    [{ selector: {} }, "selector must name matchLabels or matchExpressions"],
    [{ selector: { matchLabels: {} } }, "selector must name matchLabels or matchExpressions"],
    [
      { selector: { matchExpressions: [{ key: "app", operator: "In" }] } },
      "In and NotIn need values",
    ],
    [
      { selector: { matchExpressions: [{ key: "app", operator: "Exists", values: ["x"] }] } },
      "Exists and DoesNotExist take none",
    ],
    [
      { selector: { matchExpressions: [{ key: "app", operator: "Has" }] } },
      "spec.health.pods[0].selector.matchExpressions[0].operator",
    ],
    [{ namespace: "Kube System" }, "spec.health.pods[0].namespace"],
    [
      { selector: { matchExpressions: [{ key: "not a key!", operator: "Exists" }] } },
      "spec.health.pods[0].selector.matchExpressions[0].key",
    ],
  ])("health gate %j is refused, naming %s", async (g, want) => {
    expect(await refusal(cluster(uniqueName("c"), gate(g)))).toContain(want);
  });

  const blocking = (b: Record<string, unknown>) => ({
    disruption: { blockingPods: [{ selector: { matchLabels: { app: "backup" } }, ...b }] },
  });
  it.each([[{}], [{ namespace: "backup" }]])("blocking pods %j are accepted", async (b) => {
    expect(await refusal(cluster(uniqueName("c"), blocking(b)))).toBeUndefined();
  });
  it.each([
    [{ selector: {} }, "selector must name matchLabels or matchExpressions"],
    [
      { selector: { matchExpressions: [{ key: "app", operator: "NotIn" }] } },
      "In and NotIn need values",
    ],
    [
      { selector: { matchExpressions: [{ key: "not a key!", operator: "Exists" }] } },
      "spec.disruption.blockingPods[0].selector.matchExpressions[0].key",
    ],
  ])("blocking pods %j are refused, naming %s", async (b, want) => {
    expect(await refusal(cluster(uniqueName("c"), blocking(b)))).toContain(want);
  });

  it("windows default their time zone to UTC; the brake defaults to one failed trial", async () => {
    const created = await api.clusters.create(cluster(uniqueName("c"), win({})), { dryRun: true });
    expect(created.spec.disruption?.windows?.[0]?.timeZone).toBe("UTC");
    expect(created.spec.rollout?.maxFailedTrials).toBe(1);
    expect(created.spec.rollout?.soakSeconds).toBe(0);
    const msg = await refusal(cluster(uniqueName("c"), { rollout: { maxFailedTrials: -1 } }));
    expect(msg).toContain("spec.rollout.maxFailedTrials");
  });

  it("maxUnavailable defaults to 1", async () => {
    const created = await api.clusters.create(cluster(uniqueName("c"), {}), { dryRun: true });
    expect(created.spec.disruption?.maxUnavailable).toBe(1);
  });

  it("peers are off by default, with a 50 MiB/s upload cap and one channel machine", async () => {
    const created = await api.clusters.create(cluster(uniqueName("c"), {}), { dryRun: true });
    expect(created.spec.peers).toEqual({
      enabled: false,
      maxUploadBytesPerSecond: 52428800,
      channelMachines: 1,
    });
    const on = await api.clusters.create(cluster(uniqueName("c"), { peers: { enabled: true } }), {
      dryRun: true,
    });
    expect(on.spec.peers?.enabled).toBe(true);
  });

  it.each([
    [{ maxUploadBytesPerSecond: 1000 }, "spec.peers.maxUploadBytesPerSecond"],
    [{ channelMachines: 0 }, "spec.peers.channelMachines"],
    [{ enabled: "yes" }, "spec.peers.enabled"],
  ])("peers %j is refused, naming the field", async (peers, field) => {
    expect(await refusal(cluster(uniqueName("c"), { peers }))).toContain(field);
  });

  it("a source that is not an http(s) URL is refused", async () => {
    const c = cluster(uniqueName("c"), {});
    c.spec.releases.source = "ftp://releases.liken.sh";
    expect(await refusal(c)).toContain("spec.releases.source");
  });
});

describe("Machine rules on the real API server", () => {
  it("rebootPolicy defaults to Manual and role to Worker", async () => {
    const m = await api.machines.create(machine(uniqueName("m"), {}), { dryRun: true });
    expect(m.spec.rebootPolicy).toBe("Manual");
    expect(m.spec.role).toBe("Worker");
  });

  it("an unknown rebootPolicy is refused, naming the allowed values", async () => {
    expect(await refusal(machine(uniqueName("m"), { rebootPolicy: "Auto" }))).toBeUndefined();
    const msg = await refusal(machine(uniqueName("m"), { rebootPolicy: "Sometimes" }));
    expect(msg).toContain('spec.rebootPolicy: Unsupported value: "Sometimes"');
    expect(msg).toContain('"Manual", "Auto"');
  });

  it("an unknown status step is refused", async () => {
    const m = await api.machines.create(machine(uniqueName("m"), {}));
    try {
      m.status = { step: "Downloading" };
      const written = await api.machines.replaceStatus(m);
      written.status = { step: "Sleeping" as "Ready" };
      await expect(api.machines.replaceStatus(written)).rejects.toThrow(
        /status\.step: Unsupported value: "Sleeping"/,
      );
    } finally {
      await api.machines.delete(m.metadata.name);
    }
  });

  it("spec.cluster and spec.nodeName are immutable", async () => {
    const m = await api.machines.create(machine(uniqueName("m"), {}));
    try {
      await expect(
        api.machines.patch(m.metadata.name, { spec: { rebootPolicy: "Auto" } }),
      ).resolves.toMatchObject({ spec: { rebootPolicy: "Auto" } });
      await expect(
        api.machines.patch(m.metadata.name, { spec: { cluster: "elsewhere" } }),
      ).rejects.toThrow(/spec\.cluster is immutable: delete the Machine and create it again/);
      await expect(
        api.machines.patch(m.metadata.name, { spec: { nodeName: "another-node" } }),
      ).rejects.toThrow(/spec\.nodeName is immutable/);
    } finally {
      await api.machines.delete(m.metadata.name);
    }
  });

  it("an approval must name a well-formed version", async () => {
    const at = "2026-12-02T12:00:00Z";
    expect(
      await refusal(
        machine(uniqueName("m"), { approval: { version: "2026.10.10-001", by: "alice", at } }),
      ),
    ).toBeUndefined();
    expect(
      await refusal(machine(uniqueName("m"), { approval: { version: "../x", by: "alice", at } })),
    ).toContain("spec.approval.version");
  });

  it("machines are selectable by spec.cluster", async () => {
    const clusterName = uniqueName("sel");
    const names = [uniqueName("m"), uniqueName("m")];
    await api.machines.create(machine(names[0]!, { cluster: clusterName }));
    await api.machines.create(machine(names[1]!, {}));
    try {
      const { items } = await api.machines.list({ fieldSelector: `spec.cluster=${clusterName}` });
      expect(items.map((m) => m.metadata.name)).toEqual([names[0]]);
    } finally {
      for (const n of names) await api.machines.delete(n);
    }
  });
});
