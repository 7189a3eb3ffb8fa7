// Builds the pinned control plane from the Go module proxy into the cache, once.
//
// `go install pkg@version` refuses k8s.io/kubernetes and etcd's server module because of
// their replace directives, so each is built from a small generated module that requires
// it and pins every replaced module to its published version
// (docs/adr/control-plane-for-tests.md, "What the build relies on").
import { spawn, spawnSync } from "node:child_process";
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import path from "node:path";
import { ControlPlaneError } from "./errors.js";
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

const STAMP = ".complete";
/** Go version k8s.io/kubernetes 1.35 requires. */
const MIN_GO_MINOR = 25;

type Log = (line: string) => void;

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
  const modcache = spawnSync("go", ["env", "GOMODCACHE"], { encoding: "utf8" }).stdout.trim();
  const src = path.join(modcache, `sigs.k8s.io/kwok@v${KWOK_VERSION}`, "kustomize", "stage");
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
  const dir = binDir();
  const file = path.join(dir, STAMP);
  if (!existsSync(file) || readFileSync(file, "utf8") !== stamp()) return false;
  return (
    BINARIES.every((b) => existsSync(path.join(dir, b))) &&
    kwokStageFiles().every((f) => existsSync(f))
  );
}

function checkGo(): string {
  const r = spawnSync("go", ["env", "GOVERSION"], { encoding: "utf8" });
  if (r.error || r.status !== 0) {
    throw new ControlPlaneError(
      "LIKEN_CLUSTER_NO_GO",
      `the Go toolchain is needed once to build Kubernetes ${KUBERNETES_VERSION} from the Go module proxy, and \`go\` was not found on PATH; install Go 1.${MIN_GO_MINOR} or newer (Debian: golang-go from backports, or the official tarball) and run again`,
    );
  }
  const version = r.stdout.trim();
  const minor = Number(/^go1\.(\d+)/.exec(version)?.[1] ?? "0");
  if (minor < MIN_GO_MINOR) {
    throw new ControlPlaneError(
      "LIKEN_CLUSTER_OLD_GO",
      `Kubernetes ${KUBERNETES_VERSION} needs Go 1.${MIN_GO_MINOR} or newer to build, and \`go\` on PATH is ${version}; install a newer Go and run again`,
    );
  }
  return version;
}

function ldflags(): string {
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

function kubernetesModule(): string {
  const v0 = `v0.${KUBERNETES_VERSION.split(".").slice(1).join(".")}`;
  return [
    "module liken.local/k8sbuild",
    "",
    "go 1.25",
    "",
    `require k8s.io/kubernetes v${KUBERNETES_VERSION}`,
    "",
    ...STAGING_MODULES.map((m) => `replace k8s.io/${m} => k8s.io/${m} ${v0}`),
    "",
  ].join("\n");
}

function etcdModule(): string {
  return [
    "module liken.local/etcdbuild",
    "",
    "go 1.25",
    "",
    `require go.etcd.io/etcd/server/v3 v${ETCD_VERSION}`,
    "",
    ...ETCD_SIBLING_MODULES.map(
      (m) => `replace go.etcd.io/etcd/${m} => go.etcd.io/etcd/${m} v${ETCD_VERSION}`,
    ),
    "",
  ].join("\n");
}

function toolsFile(imports: string[]): string {
  return [
    "//go:build tools",
    "",
    "package tools",
    "",
    "import (",
    ...imports.map((i) => `\t_ "${i}"`),
    ")",
    "",
  ].join("\n");
}

/** Runs one go command; a failure names the step and quotes the tail of Go's own message. */
async function go(
  step: string,
  args: string[],
  cwd: string,
  log: Log,
  env: NodeJS.ProcessEnv = {},
): Promise<void> {
  const started = Date.now();
  let compiled = 0;
  let tail: string[] = [];
  const child = spawn("go", args, {
    cwd,
    env: { ...process.env, GOFLAGS: "-mod=mod", GOTOOLCHAIN: "local", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const onData = (chunk: Buffer): void => {
    const lines = chunk.toString("utf8").split("\n").filter(Boolean);
    compiled += lines.length;
    tail = [...tail, ...lines].slice(-20);
  };
  child.stdout.on("data", onData);
  child.stderr.on("data", onData);
  const ticker = setInterval(() => {
    const s = Math.round((Date.now() - started) / 1000);
    log(`  ${step}: ${s} s, ${compiled} packages so far`);
  }, 30_000);
  const code = await new Promise<number>((resolve) => {
    child.on("error", () => resolve(127));
    child.on("close", (c) => resolve(c ?? 1));
  });
  clearInterval(ticker);
  if (code !== 0) {
    const detail = tail
      .filter((l) => !l.startsWith("go: downloading"))
      .slice(-6)
      .join(" | ");
    const network = /dial tcp|proxy\.golang\.org|TLS handshake|no such host|i\/o timeout/.test(
      detail,
    );
    throw new ControlPlaneError(
      network ? "LIKEN_CLUSTER_MODULE_DOWNLOAD" : "LIKEN_CLUSTER_BUILD_FAILED",
      `${step} failed (go ${args[0]} exited ${code}): ${detail || "no output"}; ${
        network
          ? "the Go module proxy could not be reached: check GOPROXY and the network, then run again"
          : "read Go's message above; the cache was left without the failing binary, so the next run builds again"
      }`,
      { retryable: network },
    );
  }
  log(`  ${step}: done in ${Math.round((Date.now() - started) / 1000)} s`);
}

/**
 * Makes sure every pinned binary is in the cache; builds what is missing (cold: tens of
 * minutes on two cores, printed as it goes). Concurrent callers wait for one build.
 */
export async function ensureBinaries(
  log: Log = (l) => process.stderr.write(`${l}\n`),
): Promise<string> {
  if (binariesReady()) return binDir();
  const root = k8sCacheDir();
  mkdirSync(root, { recursive: true });
  return withLock(path.join(root, ".build.lock"), log, async () => {
    if (binariesReady()) return binDir();
    const goVersion = checkGo();
    const started = Date.now();
    log(
      `liken: building the control plane once (Kubernetes ${KUBERNETES_VERSION}, etcd ${ETCD_VERSION}, kwok ${KWOK_VERSION}) with ${goVersion} from the Go module proxy; a cold build takes about 15-30 minutes on 2 cores and is cached in ${root}`,
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
    writeFileSync(path.join(dir, STAMP), stamp());
    rmSync(staging, { recursive: true, force: true });
    log(`liken: control plane built in ${Math.round((Date.now() - started) / 1000)} s into ${dir}`);
    return dir;
  });
}
