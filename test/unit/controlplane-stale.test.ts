// A killed run must not leave etcd or the API server behind for the next run to trip over:
// records whose processes outlived their owner are found and stopped by pid, and only
// processes that carry the instance's data directory on their command line are touched.
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import net from "node:net";
import {
  cleanStale,
  sweepOrphans,
  type ControlPlaneState,
} from "../../src/controlplane/instance.js";
import { pidAlive } from "../../src/controlplane/lock.js";
import { assertPortFree } from "../../src/controlplane/ports.js";
import { ControlPlaneError } from "../../src/controlplane/errors.js";

let root = "";
const children: ChildProcess[] = [];

beforeEach(() => {
  root = mkdtempSync(path.join(tmpdir(), "liken-clusters-"));
  process.env.LIKEN_CLUSTERS_DIR = root;
});
afterEach(() => {
  for (const c of children) c.kill("SIGKILL");
  delete process.env.LIKEN_CLUSTERS_DIR;
  rmSync(root, { recursive: true, force: true });
});

/** A stand-in process whose command line names the data directory, as etcd's does. */
function fakeComponent(dataDir: string): ChildProcess {
  const c = spawn(
    process.execPath,
    ["-e", "setInterval(() => {}, 1000)", `--data-dir=${dataDir}`],
    {
      stdio: "ignore",
    },
  );
  children.push(c);
  return c;
}

function record(name: string, ownerPid: number, pids: number[]): ControlPlaneState {
  const dataDir = path.join(root, name);
  mkdirSync(dataDir, { recursive: true });
  const s = {
    name,
    version: "x",
    dataDir,
    ownerPid,
    server: "",
    kubeconfig: "",
    binDir: "",
    certs: { caCert: "", caKey: "", servingCert: "", servingKey: "", saKey: "", saPub: "" },
    ports: { etcd: 0, etcdPeer: 0, apiserver: 0, controllerManager: 0, scheduler: 0, kwok: 0 },
    processes: pids.map((pid) => ({ name: "etcd" as const, pid, log: "" })),
    startedAt: "",
  } satisfies ControlPlaneState;
  writeFileSync(path.join(dataDir, "state.json"), JSON.stringify(s));
  return s;
}

async function exited(c: ChildProcess): Promise<boolean> {
  const deadline = Date.now() + 15_000;
  while (Date.now() < deadline) {
    if (c.exitCode !== null || c.signalCode !== null) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return false;
}

describe("stale control planes", () => {
  it("stops the processes of a run whose owner died and removes its directory", async () => {
    const dataDir = path.join(root, "test-1");
    const c = fakeComponent(dataDir);
    // An owner pid that cannot be alive: pid_max on Linux is at most 2^22.
    record("test-1", 4_194_305, [c.pid!]);
    await sweepOrphans();
    expect(await exited(c)).toBe(true);
    expect(existsSync(dataDir)).toBe(false);
  });

  it("leaves a control plane whose owner is alive", async () => {
    const dataDir = path.join(root, "test-2");
    const c = fakeComponent(dataDir);
    record("test-2", process.pid, [c.pid!]);
    await sweepOrphans();
    expect(pidAlive(c.pid!)).toBe(true);
    expect(existsSync(dataDir)).toBe(true);
  });

  it("never signals a pid that is not ours, even if the record names it", async () => {
    const stranger = spawn(process.execPath, ["-e", "setInterval(() => {}, 1000)"], {
      stdio: "ignore",
    });
    children.push(stranger);
    record("test-3", 4_194_305, [stranger.pid!]);
    expect(await cleanStale("test-3")).toBe(true);
    expect(pidAlive(stranger.pid!)).toBe(true);
  });
});

describe("ports", () => {
  it("refuses a port in use with a line that says what to do", async () => {
    const srv = net.createServer();
    await new Promise<void>((r) => srv.listen(0, "127.0.0.1", () => r()));
    const port = (srv.address() as net.AddressInfo).port;
    try {
      await expect(assertPortFree(port, "kube-apiserver")).rejects.toThrowError(ControlPlaneError);
      await expect(assertPortFree(port, "kube-apiserver")).rejects.toThrowError(
        new RegExp(
          `port ${port} on 127.0.0.1 \\(wanted for kube-apiserver\\) is in use by another process; stop that process or choose another port`,
        ),
      );
    } finally {
      srv.close();
    }
    await expect(assertPortFree(port, "kube-apiserver")).resolves.toBeUndefined();
  });
});
