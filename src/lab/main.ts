// `npm run lab [-- --demo | --follow | --revert | --rings] [-- --machines N]`: wiring only (see lab.ts and demo.ts).
import { Command } from "commander";
import { errorText, LikenError } from "../errors.js";
import { runDemo } from "./demo.js";
import { runFollow } from "./follow.js";
import { runRings } from "./rings.js";
import { REPO_ROOT } from "../controlplane/paths.js";
import { LAB_CLUSTER, LAB_DIR, LAB_KUBECONFIG, startLab, stopLab, type Lab } from "./lab.js";
import path from "node:path";
import { FAULT_ACTIONS, sendFault, serveControl, type FaultAction } from "./control.js";
import { buildLabRelease } from "./releases.js";
import { startFleet } from "./processes.js";
import { REVERT_HOWS, revertSummary, runRevert, type RevertHow } from "./revert.js";
import { moveLabClock } from "./health-gate.js";

/** Set once stdout or stderr is a broken pipe (`npm run lab | tee`, then Ctrl-C kills tee). */
let quiet = false;
const err = (l: string): void => {
  if (!quiet) process.stderr.write(`${l}\n`);
};

/** Commands with their comments lined up in one column. */
function commandLines(rows: [command: string, comment?: string][]): string {
  const width = Math.max(...rows.map(([c]) => c.length)) + 2;
  return rows
    .map(([c, note]) => `  ${note === undefined ? c : `${c.padEnd(width)}# ${note}`}`)
    .join("\n");
}

/**
 * A `kubectl patch` that sets one maintenance window, every day for one hour from 12 hours
 * after `now` (UTC): closed when the tour is printed and for the next 11 hours.
 */
function closedWindowPatch(now: Date): string {
  const opens = new Date(now.getTime() + 12 * 3600_000);
  const hhmm = opens.toISOString().slice(11, 16);
  const window = {
    days: ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"],
    start: hhmm,
    duration: "1h",
    timeZone: "UTC",
  };
  const patch = JSON.stringify({ spec: { disruption: { windows: [window] } } });
  return `kubectl patch cluster ${LAB_CLUSTER} --type merge -p '${patch}'`;
}

function tour(lab: Lab): string {
  const [current, next] = lab.releases;
  const manual = lab.fleet.find((m) => m.rebootPolicy === "Manual")?.name ?? "node-4";
  const worker = lab.fleet.at(-1)?.name ?? "node-5";
  return `
liken lab is running: Kubernetes v${lab.controlPlane.version} at ${lab.controlPlane.server}, channel ${lab.channel.url},
cluster-operator, and ${lab.fleet.length} machines (${lab.fleet.map((m) => `${m.name} ${m.role.toLowerCase()} ${m.rebootPolicy}`).join(", ")}) on ${current!.version}.

In another terminal:
${commandLines([
  // liken from this checkout (bin/liken.js), never `npx liken`: npx installs the checkout as
  // a package, and its install script (node-gyp rebuild) wipes build/ under the running lab.
  [`export KUBECONFIG=${LAB_KUBECONFIG} PATH=${path.join(REPO_ROOT, "bin")}:${lab.binDir}:$PATH`],
  ["kubectl get clusters", "AVAILABLE shows the newest release the channel announces"],
  [
    `kubectl annotate cluster --all --overwrite liken.sh/check-releases="$(date -Is)"`,
    "read the channel now",
  ],
  [`liken release catalog-entry ${lab.channel.url} ${next!.version}`, "the entry to paste"],
  [`kubectl edit cluster ${LAB_CLUSTER}`, "add it to spec.releases.catalog, set spec.version"],
  ["kubectl get machines -w", "LIKEN and STATUS change one machine at a time"],
  [
    `liken approve-reboot ${LAB_CLUSTER} ${manual}`,
    "a Manual machine waits in RebootPending until you do",
  ],
  [`liken status ${LAB_CLUSTER}`, "a live view: steps, downloads, turns, what blocks"],
])}

Brakes: a maintenance window closed now (it opens in 12 h) holds every turn while the machines
download and stage (kubectl get clusters reads OutsideMaintenanceWindow); removing it lets the rollout go:
${commandLines([
  [closedWindowPatch(new Date()), "set it, then catalog and target a release as above"],
  [
    `kubectl patch cluster ${LAB_CLUSTER} --type json -p '[{"op":"remove","path":"/spec/disruption/windows"}]'`,
    "always open again: turns flow",
  ],
])}

Going back (docs/revert.md): once every machine promoted a release it is the last known good
(kubectl get clusters -o wide, LKG); after the next rollout, one command takes the fleet back,
a reboot each (the other slot holds it), and the release it leaves is revoked:
${commandLines([
  [
    `liken rollout pause ${LAB_CLUSTER}`,
    `no new turn for anything (liken rollout resume ${LAB_CLUSTER} ends it)`,
  ],
  [`liken rollout revert ${LAB_CLUSTER} --reason "..."`, "back to the last known good release"],
  [`liken rollout unrevoke ${LAB_CLUSTER} <version>`, "the revoked release may be targeted again"],
])}

Faults on demand, from another terminal:
${commandLines([
  [
    "npm run -s lab -- bad-release 2026.10.13-001",
    "its kernel panics on its trial: catalog it, set spec.version; one machine tries it, the Cluster reads ReleaseFailed",
  ],
  [
    "npm run -s lab -- bad-release 2026.10.13-002 --kubelet-down",
    "it boots, its kubelet never starts: one machine tries it, gives up with NodeNotRejoined, falls back",
  ],
  [
    `npm run -s lab -- fault stop-machine ${worker}`,
    "power a machine off: after 40 s it reads Lost and counts against the budget",
  ],
  [
    `npm run -s lab -- fault start-machine ${worker}`,
    "power it on again: it leaves Lost with its first heartbeat",
  ],
  [
    "npm run -s lab -- fault pause-operator operator-1",
    "SIGSTOP one operator copy; resume-operator wakes it",
  ],
])}

A release that goes bad after promotion, and the fleet going back by itself (spec.rollout.revert):
${commandLines([
  [
    "npm run -s lab -- bad-release 2026.10.14-001 --after-promotion",
    "it proves and is promoted; its service gate fails once its boot is an hour old",
  ],
  [
    `kubectl patch cluster ${LAB_CLUSTER} --type merge -p '{"spec":{"rollout":{"revert":{"maxFailures":2}}}}'`,
    "then catalog and target it as above",
  ],
  ["npm run -s lab -- clock 1h", "once LKG names it: an hour later on the lab's clock"],
  [
    "kubectl get clusters -o wide",
    "within a minute: Reverted RevertedOnHealthGate, every machine back without a download",
  ],
])}
(npm run lab -- --revert runs all of that by itself; --revert=command uses liken rollout revert.)

Ctrl-C stops everything.`;
}

const program = new Command("lab")
  .description(
    "a local fleet: control plane, release channel, cluster-operator, simulated machines running the real agent",
  )
  .option("--demo", "run the rollout the product page describes, then exit")
  .option(
    "--follow",
    "sign the lab's channel, let the Cluster follow it (a replay refused, a new release taken by itself), then exit",
  )
  .option(
    "--revert [how]",
    "a release proves, is promoted, and goes bad an hour later on the lab's clock: the fleet goes back " +
      "(threshold: spec.rollout.revert by itself; command: liken rollout revert), then exit",
  )
  .option(
    "--rings",
    "three rings of clusters (canary: the lab's; early: on a control plane of its own; stable): a release " +
      "proves itself in canary and liken promote carries it on signed evidence; a bad one is refused; then exit",
  )
  .option(
    "--machines <n>",
    "number of machines (3 leaders, the rest workers; default 5, with --rings 2 in canary)",
    (v) => Number(v),
  )
  .option(
    "--start-grace <seconds>",
    "cluster-operator's start-up grace, whole seconds (default: the shipped 40; the lab's end-to-end tests shorten it)",
    startGraceOf,
  )
  .exitOverride();

/** Signals this close to the first are the same keypress, relayed (see stop()). */
const SAME_KEYPRESS_MS = 1_000;

program.action(
  async (o: {
    demo?: boolean;
    follow?: boolean;
    revert?: string | true;
    rings?: boolean;
    machines?: number;
    startGrace?: number;
  }) => {
    const started = Date.now();
    const revert = revertHowOf(o.revert);
    /** Set once started; a signal before that only exits (the reaper does the rest). */
    const running: { lab?: Lab } = {};
    let stoppingSince: number | undefined;
    const stop = async (code: number): Promise<void> => {
      const lab = running.lab;
      // Still starting: exit at once; the lab's reaper (src/lab/reap.ts) ends what it started.
      if (lab === undefined) process.exit(code);
      if (stoppingSince !== undefined) {
        // One Ctrl-C arrives more than once: the terminal signals the whole foreground group,
        // and npm and tsx relay it to their child too.
        if (Date.now() - stoppingSince < SAME_KEYPRESS_MS) return;
        // A second Ctrl-C: no more waiting on agents to finish their step.
        await lab.finish();
        process.exit(code);
      }
      stoppingSince = Date.now();
      err("liken lab: stopping everything it started");
      await stopLab(lab);
      process.exit(code);
    };
    process.on("SIGINT", () => void stop(130));
    process.on("SIGTERM", () => void stop(143));
    process.on("SIGHUP", () => void stop(129));
    // A reader that went away (tee killed by the same Ctrl-C, `| head`) must not end the lab
    // before it stopped what it started: an unhandled EPIPE would. Stop, and write no more.
    for (const stream of [process.stdout, process.stderr]) {
      stream.on("error", (e: NodeJS.ErrnoException) => {
        quiet = true;
        void stop(e.code === "EPIPE" ? 141 : 1);
      });
    }
    // The rings scene's canary ring is the lab's Cluster: two machines prove a release there
    // (each more is one more turn on every release the scene rolls).
    const machines = o.machines ?? (o.rings === true ? 2 : 5);
    const lab = await startLab({ machines, log: err });
    const operatorOptions = o.startGrace === undefined ? {} : { startGraceSeconds: o.startGrace };
    running.lab = lab;
    try {
      const fleet = await startFleet(lab, err, {}, {}, operatorOptions);
      lab.stoppers.push(await serveControl(path.join(LAB_DIR, "lab"), fleet));
    } catch (e) {
      await stopLab(lab);
      throw e;
    }
    err(`liken lab: ready in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    if (o.demo || o.follow || o.rings || revert !== undefined) {
      let code = 0;
      try {
        const run =
          revert !== undefined
            ? async (l: Lab, log: (x: string) => void) =>
                revertSummary(await runRevert(l, log, revert))
            : o.follow
              ? runFollow
              : o.rings
                ? (l: Lab, log: (x: string) => void) => runRings(l, log, operatorOptions)
                : runDemo;
        process.stdout.write(`${await run(lab, err)}\n`);
      } catch (e) {
        err(`lab: ${(e as Error).message}`);
        code = 1;
      }
      await stop(code);
      return;
    }
    err(tour(lab));
    await new Promise(() => {}); // foreground until Ctrl-C
  },
);

/** --start-grace's value: whole seconds, 0 or more. */
function startGraceOf(v: string): number {
  const n = Number(v);
  if (!/^\d+$/.test(v.trim()) || !Number.isSafeInteger(n)) {
    throw new LikenError(
      "LIKEN_LAB_USAGE",
      `--start-grace takes whole seconds, 0 or more: got "${v}"; e.g. --start-grace 5 (without it, the shipped 40 s)`,
    );
  }
  return n;
}

/** --revert's value: threshold (the default) or command. */
function revertHowOf(v: string | true | undefined): RevertHow | undefined {
  if (v === undefined) return undefined;
  const how = v === true ? "threshold" : v;
  if (!REVERT_HOWS.includes(how as RevertHow)) {
    throw new LikenError(
      "LIKEN_LAB_USAGE",
      `unknown --revert "${how}"; use one of: ${REVERT_HOWS.join(", ")}`,
    );
  }
  return how as RevertHow;
}

program
  .command("fault")
  .description(`inject a fault into the running lab: ${FAULT_ACTIONS.join(", ")}`)
  .argument("<action>", FAULT_ACTIONS.join(" | "))
  .argument("<name>", "the machine (node-1...) or operator copy (operator-1, operator-2)")
  .action(async (action: string, name: string) => {
    if (!FAULT_ACTIONS.includes(action as FaultAction)) {
      throw new LikenError(
        "LIKEN_LAB_USAGE",
        `unknown fault "${action}"; use one of: ${FAULT_ACTIONS.join(", ")}`,
      );
    }
    process.stdout.write(
      `${await sendFault(path.join(LAB_DIR, "lab"), action as FaultAction, name)}\n`,
    );
  });

program
  .command("bad-release")
  .description(
    "publish into the lab's channel a release whose kernel panics on its trial boot " +
      "(--kubelet-down: it boots, but its kubelet never starts)",
  )
  .argument("<version>", "its version, e.g. 2026.10.13-001")
  .option("--kubelet-down", "the release boots and its agent runs, but its kubelet never starts")
  .option(
    "--after-promotion",
    "the release boots, proves and is promoted; its service gate fails an hour later on the lab's clock",
  )
  .action(async (version: string, opts: { kubeletDown?: boolean; afterPromotion?: boolean }) => {
    const dir = path.join(LAB_DIR, "lab");
    if (opts.afterPromotion === true) {
      const r = await buildLabRelease(
        path.join(dir, "channel"),
        dir,
        version,
        "bad-after-promotion",
      );
      process.stdout.write(
        `published ${r.version} (${r.digest}), which boots, proves and is promoted; its service gate\n` +
          `(agent.yaml health.commands "service") fails once its boot is an hour old on the lab's clock.\n` +
          `Catalog it, set spec.version and spec.rollout.revert (e.g. {maxFailures: 2}) (kubectl edit cluster ${LAB_CLUSTER});\n` +
          `once every machine promoted it (LKG in kubectl get clusters -o wide), move the clock: npm run -s lab -- clock 1h.\n` +
          `Within a minute the agents' post-promotion health fails, and cluster-operator reverts the fleet by itself\n` +
          `(Reverted RevertedOnHealthGate, gate command service); ${r.version} is revoked. Or revert at once: liken rollout revert ${LAB_CLUSTER}\n`,
      );
      return;
    }
    const behaviour = opts.kubeletDown === true ? "kubelet-down" : "panic";
    const r = await buildLabRelease(path.join(dir, "channel"), dir, version, behaviour);
    const how =
      behaviour === "panic"
        ? "whose kernel panics on its trial boot"
        : "which boots, but whose kubelet never starts: its Node never shows the trial boot's bootID";
    const back =
      behaviour === "panic"
        ? "falls back to its old slot by itself"
        : "gives the trial up at its prove deadline (NodeNotRejoined), falls back to its old slot";
    process.stdout.write(
      `published ${r.version} (${r.digest}), ${how}.\n` +
        `Catalog it and point spec.version at it (kubectl edit cluster ${LAB_CLUSTER}): every machine stages it; the first to take\n` +
        `its turn boots it once, ${back} and reports the failed trial (kubectl get machines).\n` +
        `The failure brake (spec.rollout.maxFailedTrials, default 1) then holds the rest: kubectl get clusters reads ReleaseFailed.\n` +
        `Set spec.version to another release to go on, or let one more machine try it: liken rollout resume ${LAB_CLUSTER} --failed-release\n`,
    );
  });

program
  .command("clock")
  .description(
    "move the lab's clock on (the service gate reads it; nothing else does): e.g. 1h, 30m",
  )
  .argument("<duration>", "how far, e.g. 1h, 90m, 3600s")
  .action((d: string) => {
    const m = /^(\d+)(s|m|h)$/.exec(d);
    if (m === null) {
      throw new LikenError(
        "LIKEN_LAB_USAGE",
        `"${d}" is not a duration; write e.g. 1h, 90m or 3600s`,
      );
    }
    const seconds = Number(m[1]) * { s: 1, m: 60, h: 3600 }[m[2] as "s" | "m" | "h"];
    const offset = moveLabClock(seconds);
    process.stdout.write(`the lab's clock is ${offset} s ahead of the wall clock\n`);
  });

try {
  await program.parseAsync(process.argv);
} catch (e) {
  const code = (e as { code?: unknown }).code;
  if (typeof code === "string" && code.startsWith("commander.")) {
    process.exitCode = (e as { exitCode?: number }).exitCode ?? 1;
  } else {
    err(`liken lab: ${e instanceof LikenError ? `${e.message} [${e.code}]` : errorText(e)}`);
    process.exitCode = 1;
  }
}
