// Running the health gates (health.ts decides what their results mean): the host commands as
// child processes, the pods gates as a list of the pods on this node. Run only on a trial boot,
// as an action (so the watchdog is fed while a slow check runs), one gate after another, and
// stopped at the first that does not pass: its name and output are what the report needs.
import { spawn } from "node:child_process";
import type { Logger } from "pino";
import type { Rest } from "../api/rest.js";
import type { Cluster, HealthPods } from "../api/types.js";
import { bootClockMs } from "./clock.js";
import type { AgentConfig } from "./config.js";
import { errorText } from "../errors.js";
import {
  gateNames,
  podsGate,
  selectorText,
  trimOutput,
  type GateResult,
  type HealthCheck,
  type HealthCommand,
  type HealthSeen,
  type PodView,
} from "./health.js";

/** The output kept of a command, in bytes: its tail, where the error usually is. */
export const COMMAND_OUTPUT_CAP_BYTES = 16 * 1024;
/** After the kill on a timeout, how long to wait for the pipes to close before giving up on them. */
const AFTER_KILL_MS = 2_000;

/**
 * Runs one command without a shell, stdout and stderr both (as they arrive), the last
 * COMMAND_OUTPUT_CAP_BYTES kept. It passes on exit 0. On its timeout its whole process group
 * is killed (SIGKILL: a check that hangs is not asked twice), so a `sh -c` and its children go
 * together. A command that cannot start (ENOENT, EACCES) fails with why.
 */
export function runHealthCommand(c: HealthCommand): Promise<GateResult> {
  const gate = `command ${c.name}`;
  return new Promise((resolve) => {
    let out = Buffer.alloc(0);
    const keep = (d: Buffer): void => {
      out = Buffer.concat([out, d]);
      if (out.length > COMMAND_OUTPUT_CAP_BYTES)
        out = out.subarray(out.length - COMMAND_OUTPUT_CAP_BYTES);
    };
    let settled = false;
    let timedOut = false;
    const done = (r: GateResult): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      clearTimeout(giveUp);
      resolve(r);
    };
    let giveUp: NodeJS.Timeout | undefined;
    const child = spawn(c.command[0]!, c.command.slice(1), {
      stdio: ["ignore", "pipe", "pipe"],
      // Its own process group, so the timeout kills what it started too.
      detached: true,
    });
    const timer = setTimeout(() => {
      timedOut = true;
      try {
        process.kill(-child.pid!, "SIGKILL");
      } catch {
        // gone already
      }
      // A grandchild that left the group may hold the pipes open: do not wait for it.
      giveUp = setTimeout(() => done(verdict(null, "SIGKILL")), AFTER_KILL_MS);
    }, c.timeoutSeconds * 1000);
    const verdict = (code: number | null, signal: NodeJS.Signals | null): GateResult => {
      const said = trimOutput(out.toString("utf8"));
      const tail = said === "" ? "no output" : said;
      if (timedOut) {
        return {
          gate,
          ok: false,
          output: `did not finish within ${c.timeoutSeconds} s (killed): ${tail}`,
        };
      }
      if (code === 0) return { gate, ok: true };
      const how = code === null ? `was killed by ${signal ?? "a signal"}` : `exited with ${code}`;
      return { gate, ok: false, output: `${how}: ${tail}` };
    };
    child.stdout.on("data", keep);
    child.stderr.on("data", keep);
    child.on("error", (e) =>
      done({ gate, ok: false, output: `could not run ${c.command[0]}: ${errorText(e)}` }),
    );
    child.on("close", (code, signal) => done(verdict(code, signal)));
  });
}

export interface HealthParts {
  commands: readonly HealthCommand[];
  nodeName: string;
  /** The lean API client (pods are listed with it: the idle agent loads no client-node). */
  rest: Rest;
  log: Logger;
  /** The boot clock (clock.ts). */
  now: () => number;
  /** When this boot started on the wall clock (ms): a pod counts when Ready since then. */
  bootStartedAt: () => number;
}

/** The gates of this trial boot and their last check (kept in memory: a reboot ends the boot). */
export class HealthGates {
  private last: HealthCheck | undefined;

  constructor(private readonly p: HealthParts) {}

  /** What decide() sees, for the Cluster as read this tick. */
  seen(cluster: Cluster | undefined): HealthSeen {
    const gates = gateNames(podsOf(cluster), this.p.commands);
    return { gates, ...(this.last === undefined ? {} : { last: this.last }) };
  }

  /** The last run of the gates (post-promotion.ts turns it into a status verdict). */
  lastCheck(): HealthCheck | undefined {
    return this.last;
  }

  /** Runs every gate in order, stopping at the first that does not pass, and keeps the result. */
  async check(cluster: Cluster | undefined): Promise<void> {
    const pods = podsOf(cluster);
    const gates = gateNames(pods, this.p.commands);
    let failed: HealthCheck["failed"];
    for (const g of pods) {
      const r = await this.podsGate(g);
      if (!r.ok) {
        failed = { gate: r.gate, output: r.output };
        break;
      }
    }
    for (const c of failed === undefined ? this.p.commands : []) {
      const r = await runHealthCommand(c);
      if (!r.ok) {
        failed = { gate: r.gate, output: r.output };
        break;
      }
    }
    this.last = { gates, at: this.p.now(), ...(failed === undefined ? {} : { failed }) };
    if (failed === undefined) this.p.log.info({ gates }, "health gates passed");
    else this.p.log.warn({ gate: failed.gate, output: failed.output }, "health gate does not pass");
  }

  /** Lists the pods of one gate on this node; a failed list is a gate that did not pass. */
  private async podsGate(g: HealthPods): Promise<GateResult> {
    const { rest, nodeName } = this.p;
    try {
      const list = await rest.request<{ items: PodView[] }>(
        "GET",
        `/api/v1/namespaces/${encodeURIComponent(g.namespace)}/pods`,
        {
          query: {
            labelSelector: selectorText(g.selector),
            fieldSelector: `spec.nodeName=${nodeName}`,
          },
          op: { verb: "list", kind: "Pod" },
        },
      );
      return podsGate(g, nodeName, list.items, this.p.bootStartedAt());
    } catch (e) {
      const r = podsGate(g, nodeName, [], this.p.bootStartedAt());
      return { gate: r.gate, ok: false, output: `cannot list the pods: ${errorText(e)}` };
    }
  }
}

/** The gates of this agent: its config's commands, the Cluster's pods over the lean client. */
export function healthGates(cfg: AgentConfig, rest: Rest, log: Logger): HealthGates {
  return new HealthGates({
    commands: cfg.health?.commands ?? [],
    nodeName: cfg.nodeName,
    rest,
    log,
    now: bootClockMs,
    bootStartedAt: () => Date.now() - bootClockMs(),
  });
}

function podsOf(cluster: Cluster | undefined): HealthPods[] {
  return cluster?.spec.health?.pods ?? [];
}
