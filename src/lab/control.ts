// Faults on demand: the running lab listens on loopback for a few requests a person (or a
// test) sends from another terminal with `npm run lab -- fault ...`. Its address is in
// .lab/lab/control.url while the lab runs.
import http from "node:http";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import type { AddressInfo } from "node:net";
import { request } from "undici";
import { LikenError } from "../errors.js";
import type { SimulatedMachine } from "./machine.js";

export const CONTROL_FILE = "control.url";

export interface LabControlTargets {
  machines: Map<string, SimulatedMachine>;
  /** Operator copies by identity, with their pids (paused with SIGSTOP, resumed with SIGCONT). */
  operators: Map<string, number>;
}

export type FaultAction = "stop-machine" | "start-machine" | "pause-operator" | "resume-operator";
export const FAULT_ACTIONS: readonly FaultAction[] = [
  "stop-machine",
  "start-machine",
  "pause-operator",
  "resume-operator",
];

async function act(t: LabControlTargets, action: FaultAction, target: string): Promise<string> {
  switch (action) {
    case "stop-machine":
    case "start-machine": {
      const m = t.machines.get(target);
      if (!m)
        throw new LikenError(
          "LIKEN_LAB_NO_SUCH_MACHINE",
          `no machine ${target} in the lab (${[...t.machines.keys()].join(", ")})`,
        );
      if (action === "stop-machine") {
        await m.stop();
        return `${target} is powered off: its heartbeat stops, and after 40 s it reads Lost and counts against the budget`;
      }
      m.powerOn();
      return `${target} is powered on: its agent starts and it leaves Lost with its first heartbeat`;
    }
    case "pause-operator":
    case "resume-operator": {
      const pid = t.operators.get(target);
      if (pid === undefined)
        throw new LikenError(
          "LIKEN_LAB_NO_SUCH_OPERATOR",
          `no operator copy ${target} (${[...t.operators.keys()].join(", ")})`,
        );
      process.kill(pid, action === "pause-operator" ? "SIGSTOP" : "SIGCONT");
      return action === "pause-operator"
        ? `${target} is paused (SIGSTOP): the other copy carries on; when resumed, its stale grants meet the resourceVersion-guarded record`
        : `${target} resumed (SIGCONT)`;
    }
    default: {
      const never: never = action;
      throw new LikenError("LIKEN_LAB_USAGE", `unknown fault ${String(never)}`);
    }
  }
}

export async function serveControl(
  dir: string,
  targets: LabControlTargets,
): Promise<() => Promise<void>> {
  const server = http.createServer((req, res) => {
    const m =
      /^\/(stop-machine|start-machine|pause-operator|resume-operator)\/([A-Za-z0-9._-]+)$/.exec(
        req.url ?? "",
      );
    if (req.method !== "POST" || !m) {
      res.writeHead(404).end(`use POST /<${FAULT_ACTIONS.join("|")}>/<name>\n`);
      return;
    }
    act(targets, m[1] as FaultAction, m[2]!).then(
      (msg) => res.writeHead(200).end(`${msg}\n`),
      (e: unknown) => res.writeHead(400).end(`${(e as Error).message}\n`),
    );
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const file = path.join(dir, CONTROL_FILE);
  writeFileSync(file, `http://127.0.0.1:${(server.address() as AddressInfo).port}\n`);
  return () =>
    new Promise<void>((resolve) => {
      rmSync(file, { force: true });
      server.closeAllConnections();
      server.close(() => resolve());
    });
}

/** Sends a fault to the running lab; says what happened, or that no lab runs. */
export async function sendFault(dir: string, action: FaultAction, target: string): Promise<string> {
  let url: string;
  try {
    url = readFileSync(path.join(dir, CONTROL_FILE), "utf8").trim();
  } catch {
    throw new LikenError(
      "LIKEN_LAB_NOT_RUNNING",
      "no lab is running here; start one with: npm run lab",
    );
  }
  const res = await request(`${url}/${action}/${encodeURIComponent(target)}`, { method: "POST" });
  const text = (await res.body.text()).trim();
  if (res.statusCode !== 200) throw new LikenError("LIKEN_LAB_FAULT_REFUSED", text);
  return text;
}
