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
  down,
  listStates,
  readState,
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

/** A stand-in process whose command line names a path in the data directory, as etcd's does. */
function fakeComponent(dataDir: string): ChildProcess {
  const c = spawn(
    process.execPath,
    // "--": without it node reads --data-dir as its own option and exits at once with 9.
    ["-e", "setInterval(() => {}, 1000)", "--", `--data-dir=${path.join(dataDir, "etcd")}`],
    { stdio: "ignore" },
  );
  children.push(c);
  return c;
}

/** A record cut short, as a power cut before the page cache reached the disk leaves it. */
function corruptRecord(name: string): string {
  const dataDir = path.join(root, name);
  mkdirSync(dataDir, { recursive: true });
  writeFileSync(path.join(dataDir, "state.json"), '{"name":"' + name + '","processes":[{"pi');
  return dataDir;
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

/** True once c has been ended by a signal (ours), not by exiting on its own. */
async function killed(c: ChildProcess): Promise<boolean> {
  const deadline = Date.now() + 15_000;
  while (Date.now() < deadline) {
    if (c.exitCode !== null) return false;
    if (c.signalCode !== null) return true;
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
    expect(await killed(c)).toBe(true);
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

describe("a record that cannot be read", () => {
  it("is an error that names the file and what to do, never 'no control plane'", () => {
    const dataDir = corruptRecord("test-4");
    let caught: unknown;
    try {
      readState("test-4");
    } catch (e) {
      caught = e;
    }
    expect(caught).toBeInstanceOf(ControlPlaneError);
    expect((caught as ControlPlaneError).code).toBe("LIKEN_CLUSTER_STATE_UNREADABLE");
    expect((caught as Error).message).toContain(path.join(dataDir, "state.json"));
    expect((caught as Error).message).toContain("npm run -s cluster -- down --name test-4");
  });

  it("refuses a record without the pids it must list", () => {
    const dataDir = path.join(root, "test-5");
    mkdirSync(dataDir, { recursive: true });
    writeFileSync(path.join(dataDir, "state.json"), JSON.stringify({ name: "test-5", dataDir }));
    expect(() => readState("test-5")).toThrowError(/lacks dataDir or a list of processes/);
  });

  it("is cleaned up by stopping the processes that name its directory, and only those", async () => {
    const dataDir = corruptRecord("test-1");
    const c = fakeComponent(dataDir);
    // A neighbour whose directory name starts with the same characters, and a stranger.
    const neighbour = fakeComponent(path.join(root, "test-10"));
    const stranger = spawn(process.execPath, ["-e", "setInterval(() => {}, 1000)"], {
      stdio: "ignore",
    });
    children.push(stranger);
    const lines: string[] = [];
    expect(await cleanStale("test-1", (l) => lines.push(l))).toBe(true);
    expect(await killed(c)).toBe(true);
    expect(existsSync(dataDir)).toBe(false);
    expect(lines.join("\n")).toContain(`stopping the processes that name ${dataDir}`);
    expect(lines.join("\n")).toContain(String(c.pid));
    expect(pidAlive(neighbour.pid!)).toBe(true);
    expect(pidAlive(stranger.pid!)).toBe(true);
  });

  it("is taken down by down(), its processes with it", async () => {
    const dataDir = corruptRecord("test-6");
    const c = fakeComponent(dataDir);
    expect(await down("test-6")).toBe(true);
    expect(await killed(c)).toBe(true);
    expect(existsSync(dataDir)).toBe(false);
  });

  it("is reported by listStates and left alone by the sweep, whose owner it cannot know", async () => {
    const dataDir = corruptRecord("test-7");
    const c = fakeComponent(dataDir);
    const lines: string[] = [];
    expect(listStates((l) => lines.push(l))).toEqual([]);
    expect(lines.join("\n")).toMatch(/control plane "test-7": its record .* cannot be read/);
    await sweepOrphans();
    expect(pidAlive(c.pid!)).toBe(true);
    expect(existsSync(dataDir)).toBe(true);
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
