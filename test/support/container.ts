// Runs an OCI image under runc the way a kubelet would run the operator's pod, minus what a
// test on one machine does not need: umoci unpacks the image into a runtime bundle (the
// image's own entrypoint, user and environment), and the test adds the pod's parts: its
// args, its env, the ServiceAccount volume, a read-only root, no capabilities. The container
// shares the host's network namespace, so it reaches the API server on loopback.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { execFile } from "node:child_process";
import { pidAlive } from "../../src/controlplane/lock.js";
import { waitFor } from "./kube.js";

const run = promisify(execFile);

/** Where a pod finds its ServiceAccount token, CA and namespace. */
export const SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount";

/** Extracts an OCI archive and unpacks `tag` into a runtime bundle under `dir`. */
export async function unpackImage(
  umoci: string,
  archive: string,
  tag: string,
  dir: string,
): Promise<string> {
  const layout = path.join(dir, "layout");
  const bundle = path.join(dir, "bundle");
  mkdirSync(layout, { recursive: true });
  await run("tar", ["--extract", "--file", archive, "--directory", layout]);
  await run(umoci, ["unpack", "--image", `${layout}:${tag}`, bundle]);
  return bundle;
}

interface RuntimeSpec {
  process: {
    terminal?: boolean;
    args: string[];
    env: string[];
    user: { uid: number; gid: number };
    capabilities?: Record<string, string[]>;
    noNewPrivileges?: boolean;
  };
  root: { path: string; readonly?: boolean };
  mounts: { destination: string; type: string; source: string; options: string[] }[];
  linux: { namespaces: { type: string }[] };
}

export interface PodLike {
  /** Appended to the image's entrypoint, as a container's args are. */
  args: string[];
  env: Record<string, string>;
  /** Host directory mounted read-only at SERVICE_ACCOUNT_DIR. */
  serviceAccountDir: string;
}

export interface Container {
  id: string;
  spec: RuntimeSpec;
  child: ChildProcess;
  log: () => string;
  stop(): Promise<void>;
}

/** Rewrites the bundle's config.json for `pod` and returns the spec it wrote. */
export function podSpec(bundle: string, pod: PodLike): RuntimeSpec {
  const file = path.join(bundle, "config.json");
  const spec = JSON.parse(readFileSync(file, "utf8")) as RuntimeSpec;
  spec.process.terminal = false;
  spec.process.args = [...spec.process.args, ...pod.args];
  spec.process.env = [...spec.process.env, ...Object.entries(pod.env).map(([k, v]) => `${k}=${v}`)];
  // The Deployment's securityContext: no capabilities, no privilege gain, read-only root.
  spec.process.capabilities = {
    bounding: [],
    effective: [],
    permitted: [],
    inheritable: [],
    ambient: [],
  };
  spec.process.noNewPrivileges = true;
  spec.root.readonly = true;
  spec.linux.namespaces = spec.linux.namespaces.filter((n) => n.type !== "network");
  spec.mounts.push({
    destination: SERVICE_ACCOUNT_DIR,
    type: "bind",
    source: pod.serviceAccountDir,
    options: ["rbind", "ro"],
  });
  writeFileSync(file, JSON.stringify(spec, null, 2));
  return spec;
}

/** `runc run` in the foreground (the container's stdio is runc's); stop() ends and deletes it. */
export function runContainer(
  runc: string,
  stateDir: string,
  id: string,
  bundle: string,
): Container {
  const spec = JSON.parse(readFileSync(path.join(bundle, "config.json"), "utf8")) as RuntimeSpec;
  const child = spawn(runc, ["--root", stateDir, "run", "--bundle", bundle, id], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout?.on("data", (b: Buffer) => (out += b.toString()));
  child.stderr?.on("data", (b: Buffer) => (out += b.toString()));
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  return {
    id,
    spec,
    child,
    log: () => out,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        // As a kubelet does: SIGTERM, a grace period (the Deployment's is 10 s), then SIGKILL.
        await run(runc, ["--root", stateDir, "kill", id, "TERM"]).catch(() => undefined);
        const ended = await waitFor(
          `container ${id} to exit on SIGTERM`,
          async () => child.exitCode !== null || child.signalCode !== null,
          { timeoutMs: 10_000, intervalMs: 100 },
        ).then(
          () => true,
          () => false,
        );
        if (!ended)
          await run(runc, ["--root", stateDir, "kill", id, "KILL"]).catch(() => undefined);
        await exited;
      }
      await run(runc, ["--root", stateDir, "delete", "--force", id]).catch(() => undefined);
    },
  };
}

/** A container id that names the process that owns it, so a later run can sweep it. */
export function containerId(prefix: string): string {
  return `${prefix}-${process.pid}-${Date.now().toString(36)}`;
}

/**
 * Deletes (SIGKILL first) every container in `stateDir` whose owning test runner is gone:
 * runc's containers outlive a runner that was killed before its afterAll.
 */
export async function sweepContainers(
  runc: string,
  stateDir: string,
  log: (l: string) => void,
): Promise<void> {
  const r = await run(runc, ["--root", stateDir, "list", "--format", "json"]).catch(() => ({
    stdout: "null",
  }));
  const list = (JSON.parse(r.stdout || "null") as { id: string }[] | null) ?? [];
  for (const { id } of list) {
    const owner = Number(/-(\d+)-[a-z0-9]+$/.exec(id)?.[1]);
    if (pidAlive(owner)) continue;
    await run(runc, ["--root", stateDir, "delete", "--force", id]).catch(() => undefined);
    log(`liken: removed container ${id} left by a killed test run (pid ${owner})`);
  }
}

/** A scratch directory named after this process, so a later run can remove it if it is killed. */
export function scratchDir(prefix: string): string {
  return mkdtempSync(path.join(tmpdir(), `${prefix}-${process.pid}-`));
}

/** Removes the scratch directories (unpacked images: 130 MiB each) of killed runs. */
export function sweepScratch(prefix: string): void {
  for (const name of readdirSync(tmpdir())) {
    const owner = Number(new RegExp(`^${prefix}-(\\d+)-`).exec(name)?.[1]);
    if (owner && !pidAlive(owner))
      rmSync(path.join(tmpdir(), name), { recursive: true, force: true });
  }
}
