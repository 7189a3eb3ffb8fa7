// The daemon's own loop order (src/agent/daemon.ts), in two rules. After a trial fell back
// (RECORD_BEFORE_REPORT): the failed trial is saved before the status says so. agent-order.test.ts
// checks the fall-back action itself; this file checks that the daemon's tick runs that action
// before it writes the status, so the first status that says Failed already says why. And before
// a drain (ANNOUNCED): the node is cordoned only once the status that announces the drain was
// written; a tick whose status write fails acts on nothing (seed 71742).
//
// Real parts: the daemon as `liken agent run` builds it (its Actions, its Observer, the real GRUB
// environment block, a file-backed slot staged from a loopback channel, the real memory file),
// booted by the GRUB firmware model (src/bootloader/firmware.ts) through a trial that panicked.
// Played: the API side only, handed to the daemon through DaemonOptions.apiSide. The watch cache
// (ApiView) shows one Machine and its Cluster as reachable, and the status write is recorded
// with what the memory file held on disk at that moment instead of being sent; one tick is run
// with tickOnce(). For the drain, the requests the played watch cache does not cover (the turn
// read again, the Node's cordon, its pods) go to a plain HTTP server on loopback that the
// machine's kubeconfig names. The first rule end to end, with a real API server, is
// test/integration/agent-trial.test.ts (minutes); each test here fails in well under a second.
import { afterAll, beforeAll, expect, it } from "vitest";
import { mkdirSync, writeFileSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { stringify } from "yaml";
import { MemoryFile, MemoryKeeper, type Memory } from "../../src/agent/memory.js";
import { API_ERROR_CODES, ApiError } from "../../src/api/errors.js";
import type { Cluster, MachineStatus } from "../../src/api/types.js";
import { ENV_FILES, DirEnvStore } from "../../src/bootloader/envstore.js";
import { grubBoot } from "../../src/bootloader/firmware.js";
import { GrubBootloader, initialEnvBlock } from "../../src/bootloader/grub.js";
import { observed } from "../unit/agent-fixtures.js";
import { armingActions, cluster, playedDaemon, Rebooted, stagedMachine } from "./daemon-machine.js";
import { startReleaseChannel, type ReleaseChannel } from "./release-channel.js";

const OLD = "2026.10.10-001";
const NEW = "2026.10.12-001";
let channel: ReleaseChannel;

beforeAll(async () => {
  channel = await startReleaseChannel("liken-daemon-order-", NEW);
});
afterAll(() => channel.close());

it("a trial that fell back is saved before the first status that reports it", async () => {
  const { dir, config } = await stagedMachine(channel, NEW);
  const esp = path.join(dir, "grub");
  mkdirSync(esp, { recursive: true });
  for (const f of ENV_FILES) writeFileSync(path.join(esp, f), initialEnvBlock("a"));
  const cfg = config({ bootloader: { backend: "grub", envDir: esp } });

  // The turn: the slot reads back and matches, the trial is armed and remembered, "reboot".
  const memFile = new MemoryFile(cfg.slots.stateDir);
  const before = new MemoryKeeper(memFile);
  await before.load();
  const arming = armingActions(cfg, new GrubBootloader(new DirEnvStore(esp)), before);
  const release = { version: NEW, digest: channel.digest };
  await expect(arming.checkAndReboot(observed(), "b", release)).rejects.toBeInstanceOf(Rebooted);
  // GRUB boots the trial of b once, the kernel panics, GRUB boots the default a again.
  expect(await grubBoot(new DirEnvStore(esp))).toMatchObject({ slot: "b", trial: true });
  expect(await grubBoot(new DirEnvStore(esp))).toMatchObject({ slot: "a", trial: false });

  // The daemon, started after that boot; its API side played (see the header).
  const writes: { status: MachineStatus; onDisk: Memory }[] = [];
  const daemon = playedDaemon(cfg, cluster(channel.server.url, release), OLD, async (s) => {
    writes.push({ status: s, onDisk: await memFile.load() });
  });

  const started = Date.now();
  await daemon.tickOnce();
  const ms = Date.now() - started;

  // One status for the tick, and it carries the verdict with its reason, saved before.
  expect(writes).toHaveLength(1);
  const first = writes[0]!;
  expect(first.onDisk.failed).toMatchObject([{ ...release, reason: "TrialFellBack" }]);
  expect(first.onDisk.lastTrial).toMatchObject({ ...release, result: "Failed" });
  expect(first.status.lastTrial).toMatchObject({
    ...release,
    result: "Failed",
    reason: "TrialFellBack",
  });
  expect(ms).toBeLessThan(10_000);
});

/**
 * The rest of the API side, on loopback: the Cluster `c` (the turn read again before the
 * drain), Node "m" (read, cordoned by a merge patch), no pods, Events taken; anything else 404.
 * Each request is told to `heard` as "METHOD path".
 */
async function restOfApi(
  c: Cluster,
  heard: (request: string) => void,
): Promise<{ url: string; close: () => Promise<void> }> {
  let node: Record<string, unknown> = {
    apiVersion: "v1",
    kind: "Node",
    metadata: { name: "m", resourceVersion: "1" },
    spec: {},
  };
  const server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (b: Buffer) => (body += b.toString("utf8")));
    req.on("end", () => {
      const url = new URL(req.url ?? "/", "http://x");
      heard(`${req.method} ${url.pathname}`);
      const send = (code: number, o: unknown): void => {
        res.writeHead(code, { "content-type": "application/json" }).end(JSON.stringify(o));
      };
      if (req.method === "GET" && url.pathname === "/apis/liken.sh/v1alpha1/clusters/c") {
        return send(200, c);
      }
      if (url.pathname === "/api/v1/nodes/m" && req.method === "GET") return send(200, node);
      if (url.pathname === "/api/v1/nodes/m" && req.method === "PATCH") {
        const patch = JSON.parse(body) as { metadata?: object; spec?: object };
        const meta = node.metadata as object;
        node = {
          ...node,
          metadata: { ...meta, ...patch.metadata, resourceVersion: "2" },
          spec: { ...(node.spec as object), ...patch.spec },
        };
        return send(200, node);
      }
      if (req.method === "GET" && url.pathname === "/api/v1/pods") {
        return send(200, { apiVersion: "v1", kind: "PodList", metadata: {}, items: [] });
      }
      if (req.method === "POST") return send(201, JSON.parse(body || "{}"));
      send(404, {
        kind: "Status",
        apiVersion: "v1",
        status: "Failure",
        reason: "NotFound",
        code: 404,
      });
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => {
      server.closeAllConnections();
      return new Promise((r) => server.close(() => r()));
    },
  };
}

it("a drain begins only once the status that announces it was written", async () => {
  const { dir, config } = await stagedMachine(channel, NEW, "announce");
  const esp = path.join(dir, "grub");
  mkdirSync(esp, { recursive: true });
  for (const f of ENV_FILES) writeFileSync(path.join(esp, f), initialEnvBlock("a"));
  const release = { version: NEW, digest: channel.digest };
  const turn = { machine: "m", grantedAt: "2026-12-03T12:00:00Z", grantedBy: "t", leader: false };
  const c = cluster(channel.server.url, release, { rebootTurns: [{ ...turn, ...release }] });

  // What happened, in order: each status write (or its failure) and each request to the API.
  const happened: string[] = [];
  const api = await restOfApi(c, (r) => happened.push(r));
  try {
    const kubeconfig = path.join(dir, "kubeconfig-loopback");
    writeFileSync(
      kubeconfig,
      stringify({
        apiVersion: "v1",
        kind: "Config",
        clusters: [{ name: "c", cluster: { server: api.url, "insecure-skip-tls-verify": true } }],
        users: [{ name: "u", user: { token: "t" } }],
        contexts: [{ name: "x", context: { cluster: "c", user: "u" } }],
        "current-context": "x",
      }),
    );
    const cfg = config({ bootloader: { backend: "grub", envDir: esp }, kubeconfig });
    let failNext = true; // the first status write fails as a 500 from the API server would
    const daemon = playedDaemon(cfg, c, OLD, (s) => {
      if (failNext) {
        failNext = false;
        happened.push(`status not written (${s.updateStage})`);
        const e = new ApiError(API_ERROR_CODES.unavailable, "the server answered 500", {
          httpStatus: 500,
        });
        return Promise.reject(e);
      }
      happened.push(`status written (${s.updateStage})`);
      return Promise.resolve();
    });
    const memFile = new MemoryFile(cfg.slots.stateDir);

    // The turn is held and the release staged: the tick decides to drain, but its status
    // did not land, so nothing is cordoned and no drain is begun.
    await daemon.tickOnce();
    expect(happened).toEqual(["status not written (Draining)"]);
    expect((await memFile.load()).drainBegunDigest).toBeUndefined();

    // The next tick writes it, and only then drains: the turn read again, the cordon.
    await daemon.tickOnce();
    expect(happened.slice(0, 5)).toEqual([
      "status not written (Draining)",
      "status written (Draining)",
      "GET /apis/liken.sh/v1alpha1/clusters/c",
      "GET /api/v1/nodes/m",
      "PATCH /api/v1/nodes/m",
    ]);
    expect((await memFile.load()).drainedDigest).toBe(release.digest);
  } finally {
    await api.close();
  }
});
