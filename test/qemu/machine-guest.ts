// The machine under test, as the scenario sees it: the boots it went through and, per boot,
// when the agent told systemd it was ready. Two kinds: the QEMU guest (machine-qemu.ts) and
// the lab's simulated machine (machine-lab-guest.ts), which stands in while no guest image
// exists and shows the host side alone.
import type { BootLine } from "./scenarios.js";

export interface GuestBoot {
  line: BootLine;
  /** When the boot began (ms since the scenario started). */
  atMs: number;
  /** When the agent sent READY=1 in this boot (QEMU only: systemd's "Started liken-agent"). */
  readyMs?: number;
  /** QEMU only: the release whose initrd ran (its console line), as the initrd said. */
  initrd?: { version: string; line: string };
  /** Its line is final: the OS said which release it is, or the boot ended before it could. */
  settled: boolean;
}

export interface Guest {
  kind: "qemu" | "lab";
  /** Every boot so far, in order; grows while the guest runs. */
  readonly boots: GuestBoot[];
  /** What to print after the boots (the console's lines about liken-agent, where logs are). */
  notes(): string[];
  /** The agent's log messages that arrived between two times (ms since the scenario started). */
  agentSaid(fromMs: number, toMs: number): string[];
  /** QEMU only: every serial console line so far (the guest's own log lines, e.g. LIKEN-DRA). */
  console?(): readonly string[];
  stop(): Promise<void>;
}
