import { createHook } from "node:async_hooks";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { AgentApi } from "../../src/agent/api.js";
import type { AgentConfig } from "../../src/agent/config.js";
import { DownloadSupervisor } from "../../src/agent/download.js";
import { MemoryFile, MemoryKeeper } from "../../src/agent/memory.js";
import { look, nodeSeenOf } from "../../src/agent/look.js";
import { nodeFacts, Observer } from "../../src/agent/observe.js";
import { ApiView } from "../../src/agent/view.js";
import { installGrubEnv } from "../../src/bootloader/grub.js";
import { createBootloader } from "../../src/bootloader/index.js";
import { SlotStore } from "../../src/slots/store.js";

const NODE = { verb: "get", kind: "Node", name: "m1" };

describe("a look at the API is an answer or a failure with its cause, never a verdict", () => {
  it("a 403 is a failed look with LIKEN_API_FORBIDDEN, not a Node that is not Ready", async () => {
    const forbidden = Object.assign(new Error("HTTP-Code: 403"), {
      code: 403,
      body: JSON.stringify({ kind: "Status", reason: "Forbidden", message: "nodes is forbidden" }),
    });
    const r = await look(NODE, () => Promise.reject(forbidden));
    expect(r).toMatchObject({ ok: false, error: { code: "LIKEN_API_FORBIDDEN" } });
    expect(nodeFacts(r)).toEqual({
      node: undefined,
      nodeUnread: expect.stringMatching(/nodes is forbidden.*\[LIKEN_API_FORBIDDEN\]/),
    });
  });

  it("a bug's TypeError keeps its text in the failed look", async () => {
    const r = await look(NODE, () => Promise.reject(new TypeError("x is not a function")));
    expect(r.ok).toBe(false);
    expect(nodeFacts(r).nodeUnread).toMatch(/x is not a function/);
  });

  it("an answer is a Node as read: its bootID and Ready with the heartbeat", async () => {
    const seen = { bootId: "b-1", ready: { status: "False" } };
    expect(nodeFacts(await look(NODE, () => Promise.resolve(seen)))).toEqual({
      node: seen,
      nodeUnread: undefined,
    });
    expect(nodeFacts({ ok: true, value: undefined })).toEqual({
      node: undefined,
      nodeUnread: undefined,
    });
  });

  it("reads bootID and the Ready heartbeat from a Node object", () => {
    const at = "2026-10-12T08:00:05Z";
    const node = {
      metadata: { name: "m1" },
      status: {
        nodeInfo: { bootID: "b-2" },
        conditions: [
          { type: "MemoryPressure", status: "False", lastHeartbeatTime: "2020-01-01T00:00:00Z" },
          { type: "Ready", status: "True", lastHeartbeatTime: at },
        ],
      },
    };
    expect(nodeSeenOf(node)).toEqual({
      bootId: "b-2",
      ready: { status: "True", heartbeatAt: Date.parse(at) },
    });
    expect(nodeSeenOf({ metadata: { name: "m1" } })).toEqual({ bootId: "" });
    const noBeat = {
      metadata: { name: "m1" },
      status: { conditions: [{ type: "Ready", status: "Unknown" }] },
    };
    expect(nodeSeenOf(noBeat)).toEqual({ bootId: "", ready: { status: "Unknown" } });
  });
});

describe("what a look reads on the machine", () => {
  /** An Observer over real files: GRUB's two copies, the slot store, the memory file. */
  async function observerOn(dir: string) {
    const envDir = path.join(dir, "esp");
    await installGrubEnv(envDir, "a");
    const stateDir = path.join(dir, "state");
    mkdirSync(stateDir, { recursive: true });
    const kubeconfig = path.join(dir, "kubeconfig");
    writeFileSync(
      kubeconfig,
      "apiVersion: v1\nkind: Config\ncurrent-context: c\n" +
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n" +
        "users: [{name: u, user: {token: t}}]\n" +
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n",
    );
    const cmdline = path.join(dir, "cmdline");
    const bootId = path.join(dir, "boot_id");
    writeFileSync(bootId, "1d2b7c1e-0000-4000-8000-000000000001\n");
    const cfg = { machine: "m1", cluster: "c1", nodeName: "m1", cmdline, bootId } as AgentConfig;
    const api = new AgentApi(kubeconfig, "m1");
    const memory = new MemoryKeeper(new MemoryFile(stateDir));
    await memory.load();
    const observer = new Observer({
      cfg,
      log: pino({ level: "silent" }),
      api,
      // Never started: the API reads as not reachable, which this look does not need.
      view: new ApiView(
        api,
        { machine: "m1", cluster: "c1", nodeName: "m1" },
        () => {},
        () => {},
      ),
      bootloader: createBootloader({ backend: "grub", envDir }),
      store: new SlotStore({
        slots: { a: { device: path.join(dir, "a.img") }, b: { device: path.join(dir, "b.img") } },
        cmdline,
        stateDir,
        file: path.join(dir, "agent.yaml"),
      }),
      memory,
      downloads: new DownloadSupervisor("unused", () => {}),
    });
    return { observer, cmdline };
  }

  it("reads the kernel command line at the first look only: it cannot change within a boot", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "liken-observe-"));
    try {
      const { observer, cmdline } = await observerOn(dir);
      writeFileSync(cmdline, "ro liken.slot=a quiet\n");
      expect((await observer.observe()).o.running.slot).toBe("a");
      // Each tick read it again (a file read every loopSeconds for nothing): a rewritten file
      // was seen, a removed one failed the look.
      writeFileSync(cmdline, "ro liken.slot=b quiet\n");
      expect((await observer.observe()).o.running.slot).toBe("a");
      rmSync(cmdline);
      expect((await observer.observe()).o.running.slot).toBe("a");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("an idle look makes no trip through libuv's thread pool (each wakes two threads)", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "liken-observe-"));
    try {
      const { observer, cmdline } = await observerOn(dir);
      writeFileSync(cmdline, "liken.slot=a\n");
      await observer.observe();
      // Every async fs request (fs.promises, callbacks) is an async resource of type FSREQ*.
      const trips: string[] = [];
      const hook = createHook({
        init: (_id, type) => void (type.startsWith("FSREQ") && trips.push(type)),
      }).enable();
      try {
        const seen = await observer.observe();
        expect(seen.o.boot).toEqual({ kind: "steady", slot: "a" });
      } finally {
        hook.disable();
      }
      expect(trips).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
