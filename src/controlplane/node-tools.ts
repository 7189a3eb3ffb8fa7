// What a real Kubernetes node runs besides its OS packages, built from the SAME pinned
// k8s.io/kubernetes module as the control plane (versions.ts) and cached beside the other
// tools: the kubelet, the DRA test driver of the Kubernetes tree (test/e2e/dra/test-driver,
// run in kubelet-plugin mode) and the pause binary (build/pause/linux/pause.c, static). The
// control plane's own cache key (build.ts's stamp) is untouched: these live in their own
// directory with their own stamp, so adding or changing them rebuilds nothing else.
import { spawnSync } from "node:child_process";
import { mkdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { kubernetesModule, ldflags } from "./build.js";
import { ControlPlaneError } from "./errors.js";
import {
  checkGo,
  goModCache,
  runGo,
  stampMatches,
  stderrLog,
  toolsFile,
  writeStamp,
  type Log,
} from "./gobuild.js";
import { withLock } from "./lock.js";
import { cacheRoot } from "./paths.js";
import { KUBERNETES_VERSION } from "./versions.js";

export const NODE_BINARIES = ["kubelet", "dra-test-driver", "pause"] as const;
export type NodeBinary = (typeof NODE_BINARIES)[number];

/** Go version k8s.io/kubernetes 1.35 requires (as build.ts). */
const MIN_GO_MINOR = 25;

/** The Go commands, by the name the binary gets. */
const GO_COMMANDS: Record<Exclude<NodeBinary, "pause">, string> = {
  kubelet: "k8s.io/kubernetes/cmd/kubelet",
  "dra-test-driver": "k8s.io/kubernetes/test/e2e/dra/test-driver",
};

/** The tag build/pause/Makefile of this release stamps into the binary (its TAG). */
const PAUSE_TAG = "3.10.1";

function dir(): string {
  return path.join(cacheRoot(), "tools", "node", `v${KUBERNETES_VERSION}`);
}

export function nodeBinaryPath(name: NodeBinary): string {
  return path.join(dir(), "bin", name);
}

/** What the binaries are made from: a change rebuilds them (and nothing else). */
function stamp(): string {
  return JSON.stringify({
    kubernetes: KUBERNETES_VERSION,
    commands: GO_COMMANDS,
    pause: PAUSE_TAG,
    cgo: false,
  });
}

export function nodeBinariesReady(): boolean {
  return stampMatches(path.join(dir(), "bin"), stamp(), [...NODE_BINARIES]);
}

/** pause.c of the pinned tree, compiled static (as build/pause/Makefile does, without Docker). */
function buildPause(out: string): void {
  const src = path.join(
    goModCache(),
    `k8s.io/kubernetes@v${KUBERNETES_VERSION}`,
    "build/pause/linux/pause.c",
  );
  const cc = spawnSync(
    "cc",
    ["-Os", "-Wall", "-Werror", "-static", `-DVERSION=v${PAUSE_TAG}`, "-o", out, src],
    { encoding: "utf8" },
  );
  if (cc.error || cc.status !== 0) {
    throw new ControlPlaneError(
      "LIKEN_CLUSTER_BUILD_FAILED",
      `compiling ${src} failed: ${(cc.stderr || String(cc.error)).trim().slice(-300)}; a C compiler and a static libc are needed (Debian: gcc and libc6-dev)`,
    );
  }
  spawnSync("strip", [out]);
}

/**
 * The directory of the kubelet, the DRA test driver and pause for the pinned Kubernetes,
 * built once (a few minutes with the control plane's Go build cache warm) and cached.
 */
export async function ensureNodeBinaries(log: Log = stderrLog): Promise<string> {
  const bin = path.join(dir(), "bin");
  if (nodeBinariesReady()) return bin;
  mkdirSync(dir(), { recursive: true });
  return withLock(path.join(dir(), ".build.lock"), log, async () => {
    if (nodeBinariesReady()) return bin;
    const goVersion = checkGo(`the kubelet ${KUBERNETES_VERSION}`, MIN_GO_MINOR);
    const started = Date.now();
    log(
      `liken: building the node's kubelet, DRA test driver and pause (Kubernetes ${KUBERNETES_VERSION}) once with ${goVersion} into ${bin}`,
    );
    const src = path.join(dir(), "src");
    mkdirSync(src, { recursive: true });
    writeFileSync(path.join(src, "go.mod"), kubernetesModule("liken.local/nodebuild"));
    writeFileSync(path.join(src, "tools.go"), toolsFile(Object.values(GO_COMMANDS)));
    await runGo("resolve the node's Kubernetes modules", ["mod", "tidy"], src, log, {
      GOFLAGS: "",
    });
    const staging = path.join(dir(), "staging");
    rmSync(staging, { recursive: true, force: true });
    mkdirSync(staging, { recursive: true });
    for (const [name, pkg] of Object.entries(GO_COMMANDS)) {
      await runGo(
        `build ${name}`,
        ["build", "-v", "-trimpath", "-ldflags", ldflags(), "-o", path.join(staging, name), pkg],
        src,
        log,
        { CGO_ENABLED: "0" },
      );
    }
    buildPause(path.join(staging, "pause"));
    // Only a complete set becomes visible: the stamp is written last.
    mkdirSync(bin, { recursive: true });
    for (const b of NODE_BINARIES) renameSync(path.join(staging, b), path.join(bin, b));
    writeStamp(bin, stamp());
    rmSync(staging, { recursive: true, force: true });
    log(`liken: node binaries built in ${Math.round((Date.now() - started) / 1000)} s: ${bin}`);
    return bin;
  });
}
