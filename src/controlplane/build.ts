// Builds the pinned control plane from the Go module proxy into the cache, once.
//
// `go install pkg@version` refuses k8s.io/kubernetes and etcd's server module because of
// their replace directives, so each is built from a small generated module that requires
// it and pins every replaced module to its published version
// (docs/adr/control-plane-for-tests.md, "What the build relies on").
import { copyFileSync, mkdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import {
  checkGo,
  goModCache,
  goModule,
  runGo as go,
  stampMatches,
  stderrLog,
  toolsFile,
  writeStamp,
  type Log,
} from "./gobuild.js";
import { binDir, k8sCacheDir } from "./paths.js";
import { withLock } from "./lock.js";
import {
  BINARIES,
  ETCD_SIBLING_MODULES,
  ETCD_VERSION,
  KUBERNETES_VERSION,
  KWOK_VERSION,
  STAGING_MODULES,
} from "./versions.js";

/** Go version k8s.io/kubernetes 1.35 requires. */
const MIN_GO_MINOR = 25;

function stamp(): string {
  return JSON.stringify({
    kubernetes: KUBERNETES_VERSION,
    etcd: ETCD_VERSION,
    kwok: KWOK_VERSION,
    kwokStages: KWOK_STAGES,
  });
}

/** kwok's own stage definitions (what happens to nodes and pods), next to the binaries. */
export const KWOK_STAGES_DIR = "kwok-stages";

/**
 * kwok run by itself has no stages ("no stages found"); kwokctl passes the upstream "fast"
 * set. Copy exactly those files from the kwok module the build just fetched, so the nodes and
 * pods behave as upstream defines: nodes initialize and renew their Lease, pods become Ready,
 * finish, and are removed once deleted.
 */
const KWOK_STAGES = [
  "node/fast/node-initialize.yaml",
  "node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
  "pod/fast/pod-ready.yaml",
  "pod/fast/pod-complete.yaml",
  "pod/fast/pod-delete.yaml",
];

function copyKwokStages(staging: string): void {
  const src = path.join(goModCache(), `sigs.k8s.io/kwok@v${KWOK_VERSION}`, "kustomize", "stage");
  const out = path.join(staging, KWOK_STAGES_DIR);
  mkdirSync(out, { recursive: true });
  for (const f of KWOK_STAGES) {
    copyFileSync(path.join(src, f), path.join(out, path.basename(f)));
  }
}

export function kwokStageFiles(): string[] {
  return KWOK_STAGES.map((f) => path.join(binDir(), KWOK_STAGES_DIR, path.basename(f)));
}

/** True when every binary of the pinned versions is in the cache. */
export function binariesReady(): boolean {
  return stampMatches(binDir(), stamp(), [...BINARIES, ...kwokStageFiles()]);
}

/** The `-ldflags` of a Kubernetes command: stripped, and the pinned version stamped in. */
export function ldflags(): string {
  const [major, minor] = KUBERNETES_VERSION.split(".");
  const flags = ["-s", "-w"];
  // Without these, /version and `kubectl version` report v0.0.0-master.
  for (const pkg of ["k8s.io/component-base/version", "k8s.io/client-go/pkg/version"]) {
    flags.push(
      `-X ${pkg}.gitVersion=v${KUBERNETES_VERSION}`,
      `-X ${pkg}.gitMajor=${major}`,
      `-X ${pkg}.gitMinor=${minor}`,
      `-X ${pkg}.gitTreeState=clean`,
      `-X ${pkg}.buildDate=1970-01-01T00:00:00Z`,
    );
  }
  return flags.join(" ");
}

/** A generated go.mod requiring k8s.io/kubernetes with its staging modules pinned. */
export function kubernetesModule(name = "liken.local/k8sbuild"): string {
  const v0 = `v0.${KUBERNETES_VERSION.split(".").slice(1).join(".")}`;
  return goModule(
    name,
    { "k8s.io/kubernetes": `v${KUBERNETES_VERSION}` },
    Object.fromEntries(STAGING_MODULES.map((m) => [`k8s.io/${m}`, `k8s.io/${m} ${v0}`])),
  );
}

function etcdModule(): string {
  return goModule(
    "liken.local/etcdbuild",
    { "go.etcd.io/etcd/server/v3": `v${ETCD_VERSION}` },
    Object.fromEntries(
      ETCD_SIBLING_MODULES.map((m) => [
        `go.etcd.io/etcd/${m}`,
        `go.etcd.io/etcd/${m} v${ETCD_VERSION}`,
      ]),
    ),
  );
}

/**
 * Makes sure every pinned binary is in the cache; builds what is missing (cold: tens of
 * minutes on two cores, printed as it goes). Concurrent callers wait for one build.
 */
export async function ensureBinaries(log: Log = stderrLog): Promise<string> {
  if (binariesReady()) return binDir();
  const root = k8sCacheDir();
  mkdirSync(root, { recursive: true });
  return withLock(path.join(root, ".build.lock"), log, async () => {
    if (binariesReady()) return binDir();
    const goVersion = checkGo(`Kubernetes ${KUBERNETES_VERSION}`, MIN_GO_MINOR);
    const started = Date.now();
    log(
      `liken: building the control plane once (Kubernetes ${KUBERNETES_VERSION}, etcd ${ETCD_VERSION}, kwok ${KWOK_VERSION}) with ${goVersion} from the Go module proxy; a cold build took 4 minutes on an idle 2-core machine (8 beside other work) and is cached in ${root}`,
    );
    const staging = path.join(root, "staging");
    rmSync(staging, { recursive: true, force: true });
    mkdirSync(staging, { recursive: true });

    const k8s = path.join(root, "src-kubernetes");
    mkdirSync(k8s, { recursive: true });
    writeFileSync(path.join(k8s, "go.mod"), kubernetesModule());
    writeFileSync(
      path.join(k8s, "tools.go"),
      toolsFile(
        ["kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl"].map(
          (c) => `k8s.io/kubernetes/cmd/${c}`,
        ),
      ),
    );
    await go("resolve Kubernetes modules", ["mod", "tidy"], k8s, log, { GOFLAGS: "" });
    await go(
      "build kube-apiserver, kube-controller-manager, kube-scheduler, kubectl",
      [
        "build",
        "-v",
        "-trimpath",
        "-ldflags",
        ldflags(),
        "-o",
        `${staging}/`,
        ...["kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl"].map(
          (c) => `k8s.io/kubernetes/cmd/${c}`,
        ),
      ],
      k8s,
      log,
    );

    const etcd = path.join(root, "src-etcd");
    mkdirSync(etcd, { recursive: true });
    writeFileSync(path.join(etcd, "go.mod"), etcdModule());
    writeFileSync(path.join(etcd, "tools.go"), toolsFile(["go.etcd.io/etcd/server/v3"]));
    await go("resolve etcd modules", ["mod", "tidy"], etcd, log, { GOFLAGS: "" });
    await go(
      "build etcd",
      [
        "build",
        "-v",
        "-trimpath",
        "-ldflags",
        "-s -w",
        "-o",
        path.join(staging, "etcd"),
        "go.etcd.io/etcd/server/v3",
      ],
      etcd,
      log,
    );

    await go(
      "build kwok",
      [
        "install",
        "-v",
        "-trimpath",
        "-ldflags",
        "-s -w",
        `sigs.k8s.io/kwok/cmd/kwok@v${KWOK_VERSION}`,
      ],
      root,
      log,
      { GOBIN: staging, GOFLAGS: "" },
    );

    copyKwokStages(staging);

    // Only a complete set becomes visible: the stamp is written last.
    const dir = binDir();
    mkdirSync(dir, { recursive: true });
    rmSync(path.join(dir, KWOK_STAGES_DIR), { recursive: true, force: true });
    renameSync(path.join(staging, KWOK_STAGES_DIR), path.join(dir, KWOK_STAGES_DIR));
    for (const b of BINARIES) renameSync(path.join(staging, b), path.join(dir, b));
    writeStamp(dir, stamp());
    rmSync(staging, { recursive: true, force: true });
    log(`liken: control plane built in ${Math.round((Date.now() - started) / 1000)} s into ${dir}`);
    return dir;
  });
}
