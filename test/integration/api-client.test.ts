// The typed API layer against the real API server: conditioned status writes and their
// 409, merge patches, the retry that re-decides, the watcher's recovery, heartbeats.
import net from "node:net";
import { afterAll, describe, expect, it } from "vitest";
import { KubeConfig } from "@kubernetes/client-node";
import {
  ConflictError,
  HeartbeatClient,
  LikenApi,
  ResourceWatcher,
  type ApiError,
  type Cluster,
  type Machine,
  type WatchEvent,
} from "../../src/api/index.js";
import { createCluster } from "../support/clusters.js";
import { kubeConfig, kubectl, uniqueName, waitFor } from "../support/kube.js";

const api = new LikenApi(kubeConfig());
const cleanup: (() => Promise<unknown>)[] = [];

afterAll(async () => {
  for (const c of cleanup.reverse()) await c().catch(() => undefined);
});

async function newCluster(): Promise<Cluster> {
  const name = uniqueName("lab");
  const c = await createCluster(api, name);
  cleanup.push(() => api.clusters.delete(name));
  return c;
}

async function newMachine(cluster: string, name = uniqueName("node")): Promise<Machine> {
  const m = await api.machines.create({
    apiVersion: "liken.sh/v1alpha1",
    kind: "Machine",
    metadata: { name },
    spec: { cluster, nodeName: name },
  });
  cleanup.push(() => api.machines.delete(name));
  return m;
}

function turn(machine: string): NonNullable<Cluster["status"]>["rebootTurns"] & object {
  return [
    {
      machine,
      grantedAt: "2026-12-02T12:00:00Z",
      grantedBy: "operator-a",
      leader: false,
      version: "2026.10.10-001",
    },
  ];
}

describe("status writes conditioned on resourceVersion", () => {
  it("a write computed from a stale read is refused with a retryable ConflictError", async () => {
    const stale = await newCluster();
    const fresh = structuredClone(stale);
    fresh.status = { rebootTurns: turn("node-1"), turns: "node-1" };
    await api.clusters.replaceStatus(fresh);

    // A second operator copy that read before that write must not overwrite the turn.
    stale.status = { rebootTurns: turn("node-2"), turns: "node-2" };
    const err = await api.clusters.replaceStatus(stale).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConflictError);
    expect(err).toMatchObject({ code: "LIKEN_API_CONFLICT", retryable: true, httpStatus: 409 });
    expect((err as Error).message).toContain(
      `update status of Cluster ${stale.metadata.name}: Operation cannot be fulfilled`,
    );
    const now = await api.clusters.get(stale.metadata.name);
    expect(now.status?.rebootTurns?.map((t) => t.machine)).toEqual(["node-1"]);
  });

  it("a conditional merge patch of status with a stale resourceVersion is a conflict too", async () => {
    const c = await newCluster();
    await api.clusters.patchStatus(c.metadata.name, { status: { phase: "Updating" } });
    const err = await api.clusters
      .patchStatus(
        c.metadata.name,
        { status: { phase: "Ready" } },
        { resourceVersion: c.metadata.resourceVersion! },
      )
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConflictError);
    expect((await api.clusters.get(c.metadata.name)).status?.phase).toBe("Updating");
  });

  it("updateStatus re-reads and re-decides after a conflict, losing no record", async () => {
    const c = await newCluster();
    const name = c.metadata.name;
    const seenTurns: string[][] = [];
    const result = await api.clusters.updateStatus(name, async (current) => {
      seenTurns.push((current.status?.rebootTurns ?? []).map((t) => t.machine));
      if (seenTurns.length === 1) {
        // Another copy records a turn between our read and our write.
        const other = structuredClone(current);
        other.status = { rebootTurns: turn("node-1") };
        await api.clusters.replaceStatus(other);
      }
      const next = structuredClone(current);
      const turns = [...(current.status?.rebootTurns ?? []), ...turn("node-2")];
      next.status = { ...current.status, rebootTurns: turns };
      return next;
    });
    expect(seenTurns).toEqual([[], ["node-1"]]);
    expect(result?.status?.rebootTurns?.map((t) => t.machine)).toEqual(["node-1", "node-2"]);
  });

  it("a status write never changes the spec", async () => {
    const c = await newCluster();
    c.spec.version = "9.9.9";
    c.status = { phase: "Ready" };
    const written = await api.clusters.replaceStatus(c);
    expect(written.spec.version).toBe("2026.10.10-001");
    expect(written.status?.phase).toBe("Ready");
  });
});

describe("merge patches", () => {
  it("patch sends a merge patch: only the named fields change, null removes", async () => {
    const c = await newCluster();
    const name = c.metadata.name;
    await api.clusters.patch(name, {
      metadata: { annotations: { "liken.sh/check-releases": "2026-12-02T12:00:00Z" } },
    });
    let now = await api.clusters.get(name);
    expect(now.metadata.annotations?.["liken.sh/check-releases"]).toBe("2026-12-02T12:00:00Z");
    expect(now.spec.version).toBe("2026.10.10-001");
    await api.clusters.patch(name, {
      metadata: { annotations: { "liken.sh/check-releases": null } },
    });
    now = await api.clusters.get(name);
    expect(now.metadata.annotations?.["liken.sh/check-releases"]).toBeUndefined();
  });

  it("the server's refusal of a patch reaches the caller as LIKEN_API_INVALID", async () => {
    const c = await newCluster();
    const err = (await api.clusters
      .patch(c.metadata.name, { spec: { version: "2026.10.12-001" } })
      .catch((e: unknown) => e)) as ApiError;
    expect(err.code).toBe("LIKEN_API_INVALID");
    expect(err.causes.map((x) => x.field)).toContain("spec.version");
  });
});

/** A TCP relay to the API server that a test can cut, to play a network failure. */
async function relay(
  target: URL,
): Promise<{ port: number; down: (d: boolean) => void; close: () => void }> {
  const sockets = new Set<net.Socket>();
  let isDown = false;
  const server = net.createServer((client) => {
    if (isDown) {
      client.destroy();
      return;
    }
    const upstream = net.connect(Number(target.port), target.hostname);
    sockets.add(client).add(upstream);
    const drop = (): void => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on("error", drop).on("close", drop);
    upstream.on("error", drop).on("close", drop);
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as net.AddressInfo).port;
  return {
    port,
    down(d) {
      isDown = d;
      if (d) for (const s of sockets) s.destroy();
    },
    close() {
      for (const s of sockets) s.destroy();
      server.close();
    },
  };
}

function viaRelay(kc: KubeConfig, port: number): KubeConfig {
  const cluster = kc.getCurrentCluster()!;
  const out = new KubeConfig();
  out.loadFromOptions({
    clusters: [{ ...cluster, server: `https://127.0.0.1:${port}` }],
    users: kc.users,
    contexts: kc.contexts,
    currentContext: kc.currentContext,
  });
  return out;
}

describe("ResourceWatcher", () => {
  it("lists, follows changes of the selected Machines, and recovers from a cut connection", async () => {
    const clusterName = uniqueName("watched");
    const kc = kubeConfig();
    const r = await relay(new URL(kc.getCurrentCluster()!.server));
    cleanup.push(async () => r.close());
    const events: string[] = [];
    const errors: ApiError[] = [];
    const watcher = new ResourceWatcher(
      new LikenApi(viaRelay(kc, r.port)).machines,
      {
        onChange: (e: WatchEvent<Machine>) => events.push(`${e.type} ${e.object.metadata.name}`),
        onError: (e) => errors.push(e),
      },
      { fieldSelector: `spec.cluster=${clusterName}`, initialBackoffMs: 50, maxBackoffMs: 200 },
    );
    cleanup.push(async () => watcher.stop());

    const first = await newMachine(clusterName);
    await newMachine(uniqueName("other")); // another cluster's machine: never seen
    await watcher.start();
    expect(watcher.list().map((m) => m.metadata.name)).toEqual([first.metadata.name]);
    expect(events).toEqual([`added ${first.metadata.name}`]);

    const second = await newMachine(clusterName);
    await waitFor("the watch to report the second machine", async () =>
      events.includes(`added ${second.metadata.name}`),
    );
    second.status = { step: "Downloading" };
    await api.machines.replaceStatus(second);
    await waitFor(
      "the watch to report the status change",
      async () => watcher.get(second.metadata.name)?.status?.step === "Downloading",
    );
    expect(events).toContain(`modified ${second.metadata.name}`);

    // The network fails: changes made meanwhile come back through a re-list.
    const listsBefore = watcher.lists;
    r.down(true);
    await api.machines.delete(first.metadata.name);
    const third = await newMachine(clusterName);
    await waitFor("the watcher to notice the cut", async () => errors.length > 0);
    r.down(false);
    await waitFor(
      "the watcher to re-list and catch up",
      async () =>
        events.includes(`deleted ${first.metadata.name}`) &&
        events.includes(`added ${third.metadata.name}`),
    );
    expect(watcher.lists).toBeGreaterThan(listsBefore);
    expect(errors[0]?.code).toBe("LIKEN_API_UNAVAILABLE");
    expect(
      watcher
        .list()
        .map((m) => m.metadata.name)
        .sort(),
    ).toEqual([second.metadata.name, third.metadata.name].sort());
  });

  it("a watch from a resourceVersion the server no longer has (410) re-lists, quietly", async () => {
    const clusterName = uniqueName("resumed");
    const m = await newMachine(clusterName);
    const errors: ApiError[] = [];
    const synced: string[][] = [];
    const watcher = new ResourceWatcher(
      api.machines,
      {
        onSync: (all) => synced.push(all.map((x) => x.metadata.name)),
        onError: (e) => errors.push(e),
      },
      // "1": long compacted out of the watch cache; the server answers with an ERROR
      // event carrying a 410 Expired Status.
      { fieldSelector: `spec.cluster=${clusterName}`, resumeFrom: "1" },
    );
    cleanup.push(async () => watcher.stop());
    await watcher.start();
    await waitFor("the re-list after 410", async () => watcher.lists === 1);
    expect(synced).toEqual([[m.metadata.name]]);
    expect(errors).toEqual([]);
    // And it watches on from the list: a change now arrives through the watch.
    const other = await newMachine(clusterName);
    await waitFor("the next machine through the watch", async () =>
      watcher.get(other.metadata.name),
    );
    expect(watcher.lists).toBe(1);
  });
});

describe("heartbeats", () => {
  it("renew creates the machine's Lease in liken-heartbeats, then moves its renewTime", async () => {
    const ns = await kubectl(["create", "namespace", "liken-heartbeats"]);
    expect([0, 1]).toContain(ns.code); // exists already when config/ was applied
    const hb = new HeartbeatClient(kubeConfig());
    const machine = uniqueName("node");
    const cluster = uniqueName("lab");
    cleanup.push(() => kubectl(["-n", "liken-heartbeats", "delete", "lease", machine]));
    const t1 = new Date("2026-12-02T12:00:00.123Z");
    const first = await hb.renew(machine, cluster, t1);
    expect(first.renewTime?.toISOString()).toBe(t1.toISOString());
    const t2 = new Date("2026-12-02T12:00:10.456Z");
    await hb.renew(machine, cluster, t2);
    const listed = await hb.list(cluster);
    expect(listed).toHaveLength(1);
    expect(listed[0]).toMatchObject({ machine, cluster });
    expect(listed[0]?.renewTime?.toISOString()).toBe(t2.toISOString());
    const lease = await kubectl(["-n", "liken-heartbeats", "get", "lease", machine, "-o", "json"]);
    const spec = (JSON.parse(lease.stdout) as { spec: Record<string, unknown> }).spec;
    expect(spec).toMatchObject({ holderIdentity: machine, leaseDurationSeconds: 40 });
    expect(spec.renewTime).toBe("2026-12-02T12:00:10.456000Z");
  });

  it("renews from the Lease it last wrote: one PUT, no GET; a newer or deleted Lease is re-read once", async () => {
    const hb = new HeartbeatClient(kubeConfig());
    const machine = uniqueName("node");
    const cluster = uniqueName("lab");
    cleanup.push(() => kubectl(["-n", "liken-heartbeats", "delete", "lease", machine]));
    await hb.renew(machine, cluster); // first use: GET (404) and create
    expect(hb.requests).toBe(2);
    const second = await hb.renew(machine, cluster);
    const third = await hb.renew(machine, cluster);
    expect(hb.requests).toBe(4);
    expect(Number(third.resourceVersion)).toBeGreaterThan(Number(second.resourceVersion));
    // Someone else wrote the Lease: the PUT meets a 409, the Lease is read once and written.
    await kubectl(["-n", "liken-heartbeats", "annotate", "lease", machine, "touched=yes"]);
    const after = await hb.renew(machine, cluster, new Date("2026-12-02T12:01:00Z"));
    expect(hb.requests).toBe(7);
    expect(after.renewTime?.toISOString()).toBe("2026-12-02T12:01:00.000Z");
    const lease = await kubectl(["-n", "liken-heartbeats", "get", "lease", machine, "-o", "json"]);
    const meta = (JSON.parse(lease.stdout) as { metadata: { annotations?: object } }).metadata;
    expect(meta.annotations).toMatchObject({ touched: "yes" });
    // Deleted: the PUT meets a 404; read (404) and created again.
    await kubectl(["-n", "liken-heartbeats", "delete", "lease", machine]);
    await hb.renew(machine, cluster);
    expect(hb.requests).toBe(10);
    expect(await hb.list(cluster)).toHaveLength(1);
  });
});
