// Every `liken` command, run as a person would with wrong inputs on purpose (missing files,
// URLs without a scheme, a kubeconfig that does not exist, an unknown flag, numbers out of
// range), fails with one line that ends in a stable code, and never with a stack trace.
// The commands are walked from the CLI's own commander definition, so a command added later
// is swept too. Each run is a real process of the bundled CLI.
import { spawn } from "node:child_process";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { Command, Option } from "commander";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bundleModule } from "../../src/cli/entry.js";
import { registerCommands } from "../../src/cli/commands/index.js";
import { makeProgram } from "../../src/cli/program.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
// Under a regular file: neither readable nor creatable, even by root (a command that makes
// its output directory must fail too, and leave nothing outside the test's directory).
let MISSING: string;

let bundle: string;
let bundleDir: string;
let home: string;

beforeAll(async () => {
  // Two levels under the root, like the lab's bundle, but its own directory: runs in parallel
  // never share it.
  // `.lab` does not exist on a fresh clone.
  await mkdir(path.join(ROOT, ".lab"), { recursive: true });
  bundleDir = await mkdtemp(path.join(ROOT, ".lab", "sweep-"));
  bundle = path.join(bundleDir, "liken.mjs");
  await bundleModule(path.join(ROOT, "src", "cli", "main.ts"), bundle, { splitting: true });
  home = await mkdtemp(path.join(os.tmpdir(), "liken-sweep-home-"));
  await writeFile(path.join(home, "a-file"), "");
  MISSING = path.join(home, "a-file", "missing");
}, 120_000);

afterAll(async () => {
  if (bundleDir !== undefined) await rm(bundleDir, { recursive: true, force: true });
  if (home !== undefined) await rm(home, { recursive: true, force: true });
});

/** Every command that runs something (has an action), with its path from the program. */
function leaves(cmd: Command, prefix: string[] = []): { path: string[]; cmd: Command }[] {
  return cmd.commands.flatMap((c) => {
    const p = [...prefix, c.name()];
    const own = (c as unknown as { _actionHandler: unknown })._actionHandler
      ? [{ path: p, cmd: c }]
      : [];
    return [...own, ...leaves(c, p)];
  });
}

/** A wrong value for an option or argument, chosen by what its name says it holds. */
function badValue(name: string): string {
  const n = name.toLowerCase();
  if (/port/.test(n)) return "99999";
  if (/url|source|server|endpoint|channel-url|from/.test(n)) return "127.0.0.1:44337";
  if (/timeout|ms|every|size|rate|count|max|min|threshold|wave|expires|interval/.test(n))
    return "-5";
  return MISSING;
}

function withValues(cmd: Command, options: readonly Option[]): string[] {
  const args = cmd.registeredArguments.filter((a) => a.required).map((a) => badValue(a.name()));
  const opts = options.flatMap((o) => {
    const flag = o.long ?? o.short!;
    if (!o.required && !o.optional) return o.negate ? [] : [flag];
    return [flag, badValue(o.attributeName())];
  });
  return [...args, ...opts];
}

interface Case {
  why: string;
  argv: string[];
}

function casesOf(p: string[], cmd: Command): Case[] {
  const required = cmd.options.filter((o) => o.mandatory);
  const valued = cmd.options.filter((o) => (o.required || o.optional) && !o.negate);
  return [
    { why: "an unknown flag", argv: [...p, "--no-such-flag"] },
    { why: "nothing given", argv: p },
    { why: "required inputs wrong", argv: [...p, ...withValues(cmd, required)] },
    { why: "every value wrong", argv: [...p, ...withValues(cmd, valued)] },
  ];
}

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
}

function run(argv: string[]): Promise<Run> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [bundle, ...argv], {
      cwd: home,
      env: {
        PATH: process.env.PATH ?? "",
        HOME: home,
        KUBECONFIG: path.join(home, "no-kubeconfig"),
        LIKEN_ENTRY: bundle,
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    let timedOut = false;
    // A command that waits on bad input (a server started on a wrong directory) is a failure
    // of the sweep too; 30 s is far above a start-up, even on a loaded machine.
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill("SIGKILL");
    }, 30_000);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, timedOut });
    });
  });
}

const STACK = [/^\s+at /m, /TypeError/, /RangeError/, /node:internal/, /SyntaxError/];

describe("every liken command with bad input", () => {
  it("fails with one coded line and no stack trace", async () => {
    const program = makeProgram(registerCommands);
    const cases = leaves(program).flatMap(({ path: p, cmd }) => casesOf(p, cmd));
    expect(cases.length).toBeGreaterThan(80);
    const problems: string[] = [];
    // Two at a time: the machine is shared.
    const queue = [...cases];
    const worker = async (): Promise<void> => {
      for (let c = queue.shift(); c !== undefined; c = queue.shift()) {
        const r = await run(c.argv);
        const what = `liken ${c.argv.join(" ")} (${c.why})`;
        const out = `${r.stdout}\n${r.stderr}`;
        const lines = r.stderr.split("\n").filter((l) => l.trim() !== "");
        if (r.timedOut) problems.push(`${what}: still running after 30 s`);
        else if (r.code === 0) problems.push(`${what}: exit 0`);
        else if (STACK.some((re) => re.test(out))) problems.push(`${what}: a stack trace:\n${out}`);
        else if (lines.length !== 1 || !/^liken: .+ \[LIKEN_[A-Z0-9_]+\]$/.test(lines[0]!)) {
          problems.push(`${what}: not one coded line on stderr:\n${r.stderr}`);
        }
      }
    };
    await Promise.all([worker(), worker()]);
    expect(problems, problems.join("\n\n")).toEqual([]);
  }, 900_000);
});

describe("the commands over many contexts with bad input", () => {
  /** Two contexts whose server nobody listens on: refused at once, nothing to wait for. */
  async function deadKubeconfig(): Promise<string> {
    const file = path.join(home, "fleet-kubeconfig");
    const contexts = ["a", "b"].map((n) => `- name: ${n}\n  context: {cluster: dead, user: u}`);
    await writeFile(
      file,
      [
        "apiVersion: v1",
        "kind: Config",
        "clusters:",
        "- name: dead",
        "  cluster: {server: 'https://127.0.0.1:1'}",
        "users:",
        "- name: u",
        "  user: {token: t}",
        "contexts:",
        ...contexts,
        "current-context: a",
        "",
      ].join("\n"),
    );
    return file;
  }

  const coded = (r: Run, code: string): void => {
    const lines = r.stderr.split("\n").filter((l) => l.trim() !== "");
    expect(lines, r.stderr).toHaveLength(1);
    expect(lines[0]).toMatch(new RegExp(`^liken: .+ \\[${code}\\]$`));
    expect(r.code).not.toBe(0);
  };

  it("refuses each with one coded line; a context not reached is a row, and fails pause", async () => {
    const kc = await deadKubeconfig();
    const k = ["--kubeconfig", kc];
    coded(await run(["fleet", "status", "--contexts", "a,nope", ...k]), "LIKEN_FLEET_NO_CONTEXT");
    coded(await run(["fleet", "status", "--contexts", ",", ...k]), "LIKEN_FLEET_NO_CONTEXT");
    coded(await run(["fleet", "status", "-o", "xml", ...k]), "LIKEN_CLI_USAGE");
    coded(await run(["fleet", "status", "--timeout", "0", ...k]), "LIKEN_CLI_USAGE");
    coded(await run(["rollout", "pause", ...k]), "LIKEN_OPERATOR_USAGE");
    coded(
      await run(["rollout", "pause", "--contexts", "a", "--all-contexts", ...k]),
      "LIKEN_FLEET_USAGE",
    );
    coded(await run(["rollout", "resume", "c1", "-l", "x=y", ...k]), "LIKEN_FLEET_USAGE");

    const status = await run(["fleet", "status", ...k]);
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toMatch(/^a\s+-\s+-\s+-\s+-\s+NOT REACHED\s+.*ECONNREFUSED/m);
    expect(status.stdout).toContain("0 of 2 contexts answered");

    const pause = await run(["rollout", "pause", "--all-contexts", ...k]);
    coded(pause, "LIKEN_FLEET_NOT_ALL_REACHED");
    expect(pause.stdout).toMatch(/^b: NOT REACHED: .*ECONNREFUSED/m);
    expect(pause.stdout).toContain("paused in 0 of 2 contexts");
  }, 120_000);
});
