// What every build from the Go module proxy shares: the Go toolchain check, one `go` command
// run with progress and a refusal that quotes Go, generated modules, and the stamp that makes
// a cached build visible only once it is complete. build.ts (the control plane) and tools.ts
// (helm, promtool, umoci, runc) both build through it.
import { spawn, spawnSync } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { ControlPlaneError } from "./errors.js";

export type Log = (line: string) => void;

export const stderrLog: Log = (l) => process.stderr.write(`${l}\n`);

/** The file written last into a cache directory; its content names what was built. */
const STAMP = ".complete";

/** True when `dir` holds a complete build of exactly `stamp` and every file in `files`. */
export function stampMatches(dir: string, stamp: string, files: string[]): boolean {
  const file = path.join(dir, STAMP);
  if (!existsSync(file) || readFileSync(file, "utf8") !== stamp) return false;
  return files.every((f) => existsSync(path.isAbsolute(f) ? f : path.join(dir, f)));
}

/** Marks `dir` complete: call after every file is in place, never before. */
export function writeStamp(dir: string, stamp: string): void {
  writeFileSync(path.join(dir, STAMP), stamp);
}

/**
 * Checks that `go` is on PATH and at least 1.<minMinor>; returns its version.
 * `what` names what is being built, for the refusal.
 */
export function checkGo(what: string, minMinor: number): string {
  const r = spawnSync("go", ["env", "GOVERSION"], { encoding: "utf8" });
  if (r.error || r.status !== 0) {
    throw new ControlPlaneError(
      "LIKEN_CLUSTER_NO_GO",
      `the Go toolchain is needed once to build ${what} from the Go module proxy, and \`go\` was not found on PATH; install Go 1.${minMinor} or newer (Debian: golang-go from backports, or the official tarball) and run again`,
    );
  }
  const version = r.stdout.trim();
  const minor = Number(/^go1\.(\d+)/.exec(version)?.[1] ?? "0");
  if (minor < minMinor) {
    throw new ControlPlaneError(
      "LIKEN_CLUSTER_OLD_GO",
      `${what} needs Go 1.${minMinor} or newer to build, and \`go\` on PATH is ${version}; install a newer Go and run again`,
    );
  }
  return version;
}

/** Where `go` keeps downloaded modules (their sources, read-only). */
export function goModCache(): string {
  return spawnSync("go", ["env", "GOMODCACHE"], { encoding: "utf8" }).stdout.trim();
}

/** A generated go.mod: `require`s and `replace`s written out, nothing else. */
export function goModule(
  name: string,
  requires: Record<string, string>,
  replaces: Record<string, string> = {},
): string {
  return [
    `module ${name}`,
    "",
    "go 1.25",
    "",
    ...Object.entries(requires).map(([m, v]) => `require ${m} ${v}`),
    "",
    ...Object.entries(replaces).map(([from, to]) => `replace ${from} => ${to}`),
    "",
  ].join("\n");
}

/** A tools.go that makes `go mod tidy` keep the modules of the commands to build. */
export function toolsFile(imports: string[]): string {
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
export async function runGo(
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
