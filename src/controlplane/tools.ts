// Helm, promtool, the Prometheus server, umoci and runc, each built once from the Go module proxy at a pinned version
// into the cache the control plane uses, behind the same lock and the same completeness stamp.
// A recipe per tool is data; one function builds any of them.
import { spawnSync } from "node:child_process";
import { mkdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { ControlPlaneError } from "./errors.js";
import {
  checkGo,
  goModule,
  runGo,
  stampMatches,
  stderrLog,
  toolsFile,
  writeStamp,
  type Log,
} from "./gobuild.js";
import { withLock } from "./lock.js";
import { cacheRoot } from "./paths.js";
import {
  DESYNC_VERSION,
  HELM_VERSION,
  PROMETHEUS_VERSION,
  RUNC_VERSION,
  UMOCI_VERSION,
} from "./versions.js";

export const TOOLS = ["helm", "promtool", "prometheus", "umoci", "runc", "desync"] as const;
export type Tool = (typeof TOOLS)[number];

interface Recipe {
  /** The Go module that holds the command. */
  module: string;
  /** Its version on the module proxy (v-prefixed). */
  version: string;
  /** The command's package. */
  pkg: string;
  ldflags: string[];
  tags: string[];
  /** runc's nsenter is C: it needs cgo and a C compiler. */
  cgo: boolean;
  /**
   * `go install pkg@version` refuses a module whose go.mod has replace directives, and fails
   * on a module whose versions the proxy will not list (it reads the list for deprecations);
   * such a tool is built from a generated module that requires it and copies its replacements.
   */
  replaces: boolean;
  /** The Go minor version its go.mod's `go` line asks for (GOTOOLCHAIN=local: no download). */
  goMinor: number;
}

export function prometheusModuleVersion(v: string): string {
  const [major, minor, patch] = v.split(".");
  return `v0.${major}${minor!.padStart(2, "0")}.${patch}`;
}

export const RECIPES: Record<Tool, Recipe> = {
  helm: {
    module: "helm.sh/helm/v4",
    version: `v${HELM_VERSION}`,
    pkg: "helm.sh/helm/v4/cmd/helm",
    ldflags: [
      `-X helm.sh/helm/v4/internal/version.version=v${HELM_VERSION}`,
      "-X helm.sh/helm/v4/internal/version.gitTreeState=clean",
    ],
    tags: [],
    cgo: false,
    replaces: false,
    goMinor: 26,
  },
  promtool: {
    module: "github.com/prometheus/prometheus",
    version: prometheusModuleVersion(PROMETHEUS_VERSION),
    pkg: "github.com/prometheus/prometheus/cmd/promtool",
    ldflags: [`-X github.com/prometheus/common/version.Version=${PROMETHEUS_VERSION}`],
    // Prometheus's own switch to leave out the optional service discoveries (cloud SDKs):
    // `promtool check metrics` needs none of them, and they are most of the compile.
    tags: ["remove_all_sd"],
    cgo: false,
    replaces: false,
    goMinor: 26,
  },
  // The server the alert rules and the dashboard's queries are proven against
  // (test/integration/prometheus.test.ts): the same module and version as promtool, so the two
  // share the Go build cache and most of the compile. Without the `builtinassets` tag the web
  // UI is not embedded (the test only uses the HTTP API), which keeps the build lean.
  prometheus: {
    module: "github.com/prometheus/prometheus",
    version: prometheusModuleVersion(PROMETHEUS_VERSION),
    pkg: "github.com/prometheus/prometheus/cmd/prometheus",
    ldflags: [`-X github.com/prometheus/common/version.Version=${PROMETHEUS_VERSION}`],
    tags: ["remove_all_sd"],
    cgo: false,
    replaces: false,
    goMinor: 26,
  },
  umoci: {
    module: "github.com/opencontainers/umoci",
    version: `v${UMOCI_VERSION}`,
    pkg: "github.com/opencontainers/umoci/cmd/umoci",
    ldflags: [],
    tags: [],
    cgo: false,
    replaces: true,
    goMinor: 24,
  },
  runc: {
    module: "github.com/opencontainers/runc",
    version: `v${RUNC_VERSION}`,
    pkg: "github.com/opencontainers/runc",
    ldflags: [`-X main.version=${RUNC_VERSION}`],
    // Without the seccomp tag runc needs no libseccomp; the test's spec asks for no filter.
    tags: [],
    cgo: true,
    replaces: false,
    goMinor: 25,
  },
  // The anchor bench:delta measures adaptive downloads against (casync's format in Go): a
  // chunk store of content-defined chunks, fetched one object per chunk, seeded from a file.
  desync: {
    module: "github.com/folbricht/desync",
    version: `v${DESYNC_VERSION}`,
    pkg: "github.com/folbricht/desync/cmd/desync",
    ldflags: [],
    tags: [],
    cgo: false,
    // The proxy serves v0.9.6 but answers 403 to the version list `go install` reads.
    replaces: true,
    goMinor: 19,
  },
};

function toolDir(name: Tool): string {
  return path.join(cacheRoot(), "tools", name);
}

/** Where the built binary lives: keyed by version, so a bump builds anew beside the old. */
export function toolPath(name: Tool): string {
  return path.join(toolDir(name), RECIPES[name].version, name);
}

/** What the binary is built from; a change to any of it builds anew. */
function stamp(name: Tool): string {
  const { goMinor: _checkOnly, ...built } = RECIPES[name];
  return JSON.stringify(built);
}

export function toolReady(name: Tool): boolean {
  return stampMatches(path.dirname(toolPath(name)), stamp(name), [name]);
}

export function isTool(name: string): name is Tool {
  return (TOOLS as readonly string[]).includes(name);
}

/** The module's own replace directives that point at published modules (not local paths). */
function publishedReplaces(r: Recipe): Record<string, string> {
  const dl = spawnSync("go", ["mod", "download", "-json", `${r.module}@${r.version}`], {
    encoding: "utf8",
    env: { ...process.env, GOFLAGS: "" },
  });
  const modFile = (JSON.parse(dl.stdout || "{}") as { GoMod?: string }).GoMod;
  if (dl.status !== 0 || !modFile) {
    throw new ControlPlaneError(
      "LIKEN_CLUSTER_MODULE_DOWNLOAD",
      `could not fetch ${r.module}@${r.version}'s go.mod from the Go module proxy: ${(dl.stderr || dl.stdout).trim().slice(-300)}; check GOPROXY and the network, then run again`,
      { retryable: true },
    );
  }
  const edit = spawnSync("go", ["mod", "edit", "-json", modFile], { encoding: "utf8" });
  type Ver = { Path: string; Version?: string };
  const mod = JSON.parse(edit.stdout) as { Replace?: { Old: Ver; New: Ver }[] };
  return Object.fromEntries(
    (mod.Replace ?? [])
      .filter((x) => x.New.Version)
      .map((x) => [
        x.Old.Version ? `${x.Old.Path} ${x.Old.Version}` : x.Old.Path,
        `${x.New.Path} ${x.New.Version}`,
      ]),
  );
}

async function build(name: Tool, staging: string, log: Log): Promise<void> {
  const r = RECIPES[name];
  const flags = [
    "-v",
    "-trimpath",
    "-ldflags",
    ["-s", "-w", ...r.ldflags].join(" "),
    ...(r.tags.length ? ["-tags", r.tags.join(",")] : []),
  ];
  const env = { CGO_ENABLED: r.cgo ? "1" : "0" };
  if (!r.replaces) {
    await runGo(
      `build ${name} ${r.version}`,
      ["install", ...flags, `${r.pkg}@${r.version}`],
      staging,
      log,
      { ...env, GOBIN: staging, GOFLAGS: "" },
    );
    return;
  }
  const src = path.join(toolDir(name), "src");
  rmSync(src, { recursive: true, force: true });
  mkdirSync(src, { recursive: true });
  writeFileSync(
    path.join(src, "go.mod"),
    goModule(`liken.local/${name}build`, { [r.module]: r.version }, publishedReplaces(r)),
  );
  writeFileSync(path.join(src, "tools.go"), toolsFile([r.pkg]));
  await runGo(`resolve ${name} modules`, ["mod", "tidy"], src, log, { GOFLAGS: "" });
  await runGo(
    `build ${name} ${r.version}`,
    ["build", ...flags, "-o", path.join(staging, name), r.pkg],
    src,
    log,
    env,
  );
}

/**
 * The absolute path of the pinned `name`, built from the Go module proxy on first use (a
 * minute or more on two cores, printed as it goes) and cached. Concurrent callers wait for one
 * build.
 */
export async function ensureTool(name: Tool, log: Log = stderrLog): Promise<string> {
  if (!isTool(name)) {
    throw new ControlPlaneError(
      "LIKEN_CLUSTER_UNKNOWN_TOOL",
      `no tool named "${String(name)}": liken builds ${TOOLS.join(", ")}`,
    );
  }
  const bin = toolPath(name);
  if (toolReady(name)) return bin;
  mkdirSync(toolDir(name), { recursive: true });
  return withLock(path.join(toolDir(name), ".build.lock"), log, async () => {
    if (toolReady(name)) return bin;
    const r = RECIPES[name];
    const goVersion = checkGo(`${name} ${r.version}`, r.goMinor);
    const started = Date.now();
    log(
      `liken: building ${name} ${r.version} once with ${goVersion} from the Go module proxy into ${path.dirname(bin)}`,
    );
    const staging = path.join(toolDir(name), "staging");
    rmSync(staging, { recursive: true, force: true });
    mkdirSync(staging, { recursive: true });
    await build(name, staging, log);
    // Only a complete binary becomes visible: the stamp is written last.
    const dir = path.dirname(bin);
    mkdirSync(dir, { recursive: true });
    renameSync(path.join(staging, name), bin);
    writeStamp(dir, stamp(name));
    rmSync(staging, { recursive: true, force: true });
    log(`liken: ${name} built in ${Math.round((Date.now() - started) / 1000)} s: ${bin}`);
    return bin;
  });
}
