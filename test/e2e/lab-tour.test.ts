// The README's first command as a newcomer uses it: `npm run lab`, then the commands it
// prints, run exactly as printed (each line through bash, after the printed `export`), then
// the faults it offers, then Ctrl-C, after which nothing it started is left running.
import {
  existsSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  chmodSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { REPO_ROOT } from "../../src/controlplane/paths.js";
import { LAB_CLUSTER, LAB_DIR, LAB_KUBECONFIG, LAB_VERSIONS } from "../../src/lab/lab.js";
import { printed, startLab, stopLabs, tourShell, until } from "./lab-support.js";

afterAll(stopLabs, 120_000);

/** This checkout's `.lab/` (other checkouts on the same machine may run labs of their own). */
const LAB_CLI = `${REPO_ROOT}/.lab/cli/liken.mjs`.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** Processes whose command line matches, with their state (R, S, T for stopped...). */
function pidsOf(pattern: RegExp): { pid: number; state: string }[] {
  const out: { pid: number; state: string }[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const cmd = readFileSync(`/proc/${name}/cmdline`, "utf8").replace(/\0/g, " ");
      if (!pattern.test(cmd)) continue;
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      out.push({ pid: Number(name), state: stat.slice(stat.lastIndexOf(")") + 2).split(" ")[0]! });
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

/** Whether a process runs in this checkout (`npm run lab` starts main.ts with a relative path). */
function cwdIsRepo(pid: number): boolean {
  try {
    return readlinkSync(`/proc/${pid}/cwd`) === REPO_ROOT;
  } catch {
    return false; // gone meanwhile
  }
}

describe("npm run lab, then the printed tour", () => {
  it("works as the page describes: channel, catalog, refused edit, turns, approval, faults, Ctrl-C", async () => {
    const { lab, commands, exportLine } = await startLab();
    expect(exportLine).toContain(LAB_KUBECONFIG);

    const { sh, ok } = tourShell(exportLine);
    const machines = async (): Promise<Record<string, { step?: string; version?: string }>> => {
      const j = JSON.parse(await ok("kubectl get machines -o json")) as {
        items: { metadata: { name: string }; status?: { step?: string; version?: string } }[];
      };
      return Object.fromEntries(j.items.map((m) => [m.metadata.name, m.status ?? {}]));
    };
    const [current, next] = LAB_VERSIONS;

    // The channel: AVAILABLE shows the newest release, and the annotation asks for a read.
    const clusters = await ok(printed(commands, "kubectl get clusters"));
    expect(clusters).toMatch(/NAME\s+STATUS\s+MACHINES\s+VERSION\s+NEWEST\s+AVAILABLE/);
    expect(await ok(printed(commands, "kubectl annotate cluster --all"))).toContain("annotated");
    await until(
      "AVAILABLE to show the newest release",
      async () => (await ok("kubectl get clusters")).includes(next),
      60_000,
    );

    // The catalog entry, as printed, and an edit naming an uncatalogued version, refused.
    const entry = await ok(printed(commands, "liken release catalog-entry"));
    expect(entry).toMatch(
      new RegExp(`- version: "${next.replace(/\./g, "\\.")}"\\n  digest: sha256:[0-9a-f]{64}\\n`),
    );
    const refused = await sh(
      `kubectl patch cluster ${LAB_CLUSTER} --type merge -p '{"spec":{"version":"2099.01.01-001"}}'`,
    );
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain("names no entry in spec.releases.catalog");

    // `kubectl edit` as a person does it: paste the entry under catalog:, set spec.version.
    const editor = path.join(tmpdir(), `liken-tour-editor-${process.pid}.sh`);
    const entryFile = `${editor}.entry`;
    writeFileSync(entryFile, entry.replace(/^/gm, "    ").trimEnd() + "\n");
    writeFileSync(
      editor,
      `#!/bin/bash
set -e
awk -v f=${JSON.stringify(entryFile)} '{print} /^    catalog:$/ {while ((getline l < f) > 0) print l}' "$1" > "$1.new"
mv "$1.new" "$1"
sed -i 's/^  version: ${current}$/  version: ${next}/' "$1"
`,
    );
    chmodSync(editor, 0o755);
    expect(await ok(printed(commands, "kubectl edit cluster"), { EDITOR: editor })).toContain(
      "edited",
    );

    // The Auto machines roll; the Manual ones stage and wait in RebootPending.
    const manual = printed(commands, "liken approve-reboot").split(" ").at(-1)!;
    await until(
      "every Auto machine on the new release while the Manual ones wait",
      async () => {
        const ms = await machines();
        return (
          ["node-1", "node-2", "node-3"].every(
            (n) => ms[n]?.version === next && ms[n]?.step === "Ready",
          ) &&
          ms[manual]?.step === "RebootPending" &&
          ms[manual]?.version === current
        );
      },
      300_000,
    );
    const status = await ok(printed(commands, "liken status"));
    expect(status).toContain(`waiting for: liken approve-reboot ${LAB_CLUSTER} ${manual}`);
    expect(await ok(printed(commands, "liken approve-reboot"))).toContain(
      `approved the reboot of Machine ${manual} into ${next}`,
    );
    await until(
      `${manual} on the new release after its approval`,
      async () => {
        const m = (await machines())[manual];
        return m?.version === next && m.step === "Ready";
      },
      180_000,
    );

    // Faults, as printed: a machine powered off reads Lost, and leaves Lost when powered on.
    const stopped = printed(commands, "npm run -s lab -- fault stop-machine").split(" ").at(-1)!;
    expect(await ok(printed(commands, "npm run -s lab -- fault stop-machine"))).toContain(
      "powered off",
    );
    await until(
      `${stopped} Lost`,
      async () => (await machines())[stopped]?.step === "Lost",
      120_000,
    );
    expect(await ok(printed(commands, "npm run -s lab -- fault start-machine"))).toContain(
      "powered on",
    );
    await until(
      `${stopped} back from Lost`,
      async () => {
        const s = (await machines())[stopped]?.step;
        return s !== undefined && s !== "Lost";
      },
      120_000,
    );
    // An operator copy paused (stopped, state T) and resumed.
    const operator1 = new RegExp(`${LAB_CLI} operator .*--identity operator-1\\b`);
    expect(await ok(printed(commands, "npm run -s lab -- fault pause-operator"))).toContain(
      "paused",
    );
    expect(pidsOf(operator1).map((p) => p.state)).toEqual(["T"]);
    expect(await ok("npm run -s lab -- fault resume-operator operator-1")).toContain("resumed");
    expect(pidsOf(operator1).map((p) => p.state)).not.toContain("T");
    // A fault aimed at nothing is refused with what exists.
    const none = await sh("npm run -s lab -- fault stop-machine node-9");
    expect(none.code).not.toBe(0);
    expect(none.stderr).toContain("no machine node-9 in the lab (node-1");
    // A bad release is published in the channel: the next read shows it as AVAILABLE.
    expect(await ok(printed(commands, "npm run -s lab -- bad-release"))).toContain(
      "kernel panics on its trial",
    );
    await ok(printed(commands, "kubectl annotate cluster --all"));
    await until(
      "AVAILABLE to show the bad release",
      async () => (await ok("kubectl get clusters")).includes("2026.10.13-001"),
      60_000,
    );

    // Ctrl-C: everything the lab started stops, the kubeconfig goes.
    const state = JSON.parse(
      readFileSync(path.join(LAB_DIR, "clusters", LAB_CLUSTER, "state.json"), "utf8"),
    ) as { processes: { pid: number }[] };
    const pids = state.processes.map((p) => p.pid);
    expect(pids.length).toBeGreaterThan(0);
    const exited = new Promise<number | null>((r) => lab.once("exit", r));
    process.kill(-lab.pid!, "SIGINT");
    await exited;
    await until(
      "nothing the lab started to be running",
      async () =>
        pids.every((p) => !existsSync(`/proc/${p}`)) &&
        pidsOf(new RegExp(`${LAB_CLI} (agent|operator)`)).length === 0 &&
        pidsOf(/src\/lab\/main\.ts/).filter((p) => cwdIsRepo(p.pid)).length === 0,
      60_000,
    );
    expect(existsSync(LAB_KUBECONFIG)).toBe(false);
  });
});
