// What the lab's end-to-end tests share: starting `npm run lab` as a newcomer does (in its own
// process group, as in a terminal) and reading the tour it prints, waiting with a snapshot of
// the lab in the timeout's message, running the tour's commands as a person pastes them, and
// stopping every lab a file started; running a lab scenario to its end while kubectl watches it
// from outside (runLab).
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import { expect } from "vitest";
import { binaryPath, REPO_ROOT } from "../../src/controlplane/paths.js";
import { LAB_DIR, LAB_KUBECONFIG } from "../../src/lab/lab.js";
import { waitFor } from "../support/kube.js";

export const exec = promisify(execFile);

export interface Shell {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * How a person runs the tour's commands: `sh(cmd)` runs one line through bash after the printed
 * export line, in this checkout, and says how it ended; `ok(cmd)` is its stdout, and fails the
 * test, naming the command and its stderr, when it does not exit 0.
 */
export function tourShell(exportLine: string): {
  sh: (cmd: string, env?: Record<string, string>) => Promise<Shell>;
  ok: (cmd: string, env?: Record<string, string>) => Promise<string>;
} {
  const sh = async (cmd: string, env: Record<string, string> = {}): Promise<Shell> => {
    try {
      const r = await exec("bash", ["-c", `${exportLine}; ${cmd}`], {
        cwd: REPO_ROOT,
        env: { ...process.env, ...env },
      });
      return { code: 0, stdout: r.stdout, stderr: r.stderr };
    } catch (e) {
      const x = e as { code?: number; stdout?: string; stderr?: string };
      return { code: x.code ?? 1, stdout: x.stdout ?? "", stderr: x.stderr ?? "" };
    }
  };
  const ok = async (cmd: string, env?: Record<string, string>): Promise<string> => {
    const r = await sh(cmd, env);
    expect(r.code, `${cmd}: ${r.stderr}`).toBe(0);
    return r.stdout;
  };
  return { sh, ok };
}

/** Every lab this file started, for stopLabs. */
const labs: ChildProcess[] = [];

/** Ctrl-C to each lab still running (its whole group), waiting for each to exit. For afterAll. */
export async function stopLabs(): Promise<void> {
  for (const c of labs) {
    if (c.exitCode !== null || c.signalCode !== null) continue;
    const exited = new Promise((r) => c.once("exit", r));
    try {
      process.kill(-c.pid!, "SIGINT");
    } catch {
      continue; // the group is gone already
    }
    await exited;
  }
}

export interface StartedLab {
  lab: ChildProcess;
  /** The tour's command lines, from "In another terminal:" on (see printedCommands). */
  commands: string[];
  /** The printed `export KUBECONFIG=...` line, to run before each printed command. */
  exportLine: string;
}

/**
 * The operator copies' start-up grace in the lab's scenarios here, seconds: each scenario starts
 * its rollout within seconds of the lab being ready, and with the shipped 40 s its first turn
 * waited out the rest of the grace (about 20 s a lab). The shipped grace is
 * test/integration/operator-grace.test.ts's to prove; the torture test keeps it (its checker
 * judges grants against it, and its faults restart operators).
 */
export const E2E_START_GRACE = ["--start-grace", "5"];

/** `npm run -s lab` in this checkout, once it has printed its tour. */
export async function startLab(): Promise<StartedLab> {
  const lab = spawn("npm", ["run", "-s", "lab", "--", ...E2E_START_GRACE], {
    cwd: REPO_ROOT,
    stdio: ["ignore", "pipe", "pipe"],
    // Its own process group, as in a terminal, where Ctrl-C signals the whole group.
    detached: true,
  });
  labs.push(lab);
  let stderr = "";
  lab.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
  lab.stdout!.resume();
  await until("the lab to print its tour", async () => stderr.includes("Ctrl-C stops"), 240_000);
  const commands = printedCommands(stderr.slice(stderr.indexOf("In another terminal:")));
  return { lab, commands, exportLine: printed(commands, "export KUBECONFIG=") };
}

/** One `kubectl get <kind> -w -o json` for runLab: each object it prints, as it prints it. */
export interface LabWatch {
  kind: string;
  onObject: (o: never) => void;
  /** The API server's kubeconfig (default the lab's); watched once the lab has written it. */
  kubeconfig?: string;
}

export interface LabRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * `npm run -s lab -- <args>` in this checkout, to its end. Each watch starts once the lab's
 * machines are powered on (its kubeconfig written), from outside the lab: kubectl against the
 * lab's API server, started again if it exits while the lab runs (the API was not ready yet).
 */
export async function runLab(args: string[], watches: readonly LabWatch[]): Promise<LabRun> {
  const lab = spawn("npm", ["run", "-s", "lab", "--", ...E2E_START_GRACE, ...args], {
    cwd: REPO_ROOT,
    stdio: ["ignore", "pipe", "pipe"],
    detached: true, // its own process group, for stopLabs
  });
  labs.push(lab);
  let stdout = "";
  let stderr = "";
  lab.stdout!.on("data", (d: Buffer) => (stdout += d.toString()));
  lab.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
  const watchers: ChildProcess[] = [];
  const watch = (spec: LabWatch): void => {
    if (lab.exitCode !== null) return;
    const kubeconfig = spec.kubeconfig ?? LAB_KUBECONFIG;
    // A control plane the lab starts later (the rings scene's second): not there yet.
    if (!existsSync(kubeconfig)) {
      setTimeout(() => watch(spec), 500);
      return;
    }
    const w = spawn(binaryPath("kubectl"), ["get", spec.kind, "-w", "-o", "json"], {
      env: { ...process.env, KUBECONFIG: kubeconfig },
      stdio: ["ignore", "pipe", "ignore"],
    });
    watchers.push(w);
    w.stdout!.on("data", jsonObjects(spec.onObject as (o: unknown) => void));
    w.on("exit", () => {
      if (lab.exitCode === null) setTimeout(() => watch(spec), 500);
    });
  };
  let watching = false;
  const joined = setInterval(() => {
    if (!watching && existsSync(LAB_KUBECONFIG) && /machines powered on/.test(stderr)) {
      watching = true;
      clearInterval(joined);
      for (const w of watches) watch(w);
    }
  }, 200);
  const code = await new Promise<number | null>((resolve) => lab.on("exit", resolve));
  clearInterval(joined);
  for (const w of watchers) if (w.exitCode === null) w.kill();
  return { code, stdout, stderr };
}

/** waitFor from the test support, with a snapshot of the lab in the timeout's message. */
export async function until<T>(
  what: string,
  probe: () => Promise<T | undefined | false>,
  timeoutMs: number,
): Promise<T> {
  try {
    return await waitFor(what, probe, { timeoutMs, intervalMs: 500 });
  } catch (e) {
    throw new Error(`${(e as Error).message}\n${await labSnapshot()}`);
  }
}

/** What the lab looks like, for a failure's message: objects, and each agent's last lines. */
async function labSnapshot(): Promise<string> {
  const out: string[] = [];
  try {
    const r = await exec(binaryPath("kubectl"), ["get", "clusters,machines", "-o", "wide"], {
      env: { ...process.env, KUBECONFIG: LAB_KUBECONFIG },
    });
    out.push(r.stdout);
  } catch (e) {
    out.push(`kubectl: ${String(e)}`);
  }
  const dir = path.join(LAB_DIR, "lab", "machines");
  for (const m of existsSync(dir) ? readdirSync(dir) : []) {
    const log = path.join(dir, m, "agent.log");
    if (!existsSync(log)) continue;
    const lines = readFileSync(log, "utf8").trimEnd().split("\n");
    out.push(`${m}:`, ...lines.slice(-6).map((l) => `  ${l.slice(0, 300)}`));
  }
  return out.join("\n");
}

/** The tour's command lines: two spaces in, the comment after "# " cut off. */
export function printedCommands(tour: string): string[] {
  return tour
    .split("\n")
    .filter((l) => /^ {2}\S/.test(l))
    .map((l) => l.trim().replace(/\s+# .*$/, ""));
}

/** The printed command that starts with `start`; throws when the tour prints none. */
export function printed(commands: string[], start: string): string {
  const c = commands.find((l) => l.startsWith(start));
  if (c === undefined) throw new Error(`the tour prints no command starting with ${start}`);
  return c;
}

/** Splits kubectl's stream of pretty-printed JSON objects into objects. */
export function jsonObjects<T>(onObject: (o: T) => void): (chunk: Buffer) => void {
  let buf = "";
  let depth = 0;
  let inString = false;
  let escaped = false;
  let start = -1;
  return (chunk) => {
    const text = chunk.toString("utf8");
    for (const ch of text) {
      buf += ch;
      if (inString) {
        if (escaped) escaped = false;
        else if (ch === "\\") escaped = true;
        else if (ch === '"') inString = false;
        continue;
      }
      if (ch === '"') inString = true;
      else if (ch === "{") {
        if (depth === 0) start = buf.length - 1;
        depth++;
      } else if (ch === "}") {
        depth--;
        if (depth === 0 && start >= 0) {
          onObject(JSON.parse(buf.slice(start)) as T);
          buf = "";
          start = -1;
        }
      }
    }
  };
}
