// The torture's faults on a machine's identity: its certificate re-signed by a CA the API
// server does not trust (./ca-rotation.ts), or left to lapse behind a cut network. Either way
// the machine must join again by itself, proven by a new key on its Machine (a write only an
// identity the API server accepts can make); one that does not is a violation.
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { Machine } from "../api/types.js";
import type { TortureViolation } from "./violation.js";
import { rotateAway } from "./ca-rotation.js";
import { readHeld } from "../agent/identity/files.js";
import { STOPPED_POLL_MS, type FaultTargets } from "./fault-targets.js";

/**
 * How long a machine whose CA rotated has to rejoin: 3 refused answers over at least 10 s
 * (src/agent/identity/refusals.ts), the approver's round (2 s), the status write; with room for
 * a paused leader's lease (15 s) and an etcd restart drawn at the same time.
 */
const CA_ROTATED_REJOIN_MS = 120_000;
/** A lapse's cut lasts this long past the certificate's end: the agent's clock has seen it. */
const LAPSE_MARGIN_MS = 3_000;

export class IdentityFaults {
  /** `broken`: the injector's list of rules a fault's own outcome broke. */
  constructor(
    private readonly t: FaultTargets,
    private readonly broken: TortureViolation[],
  ) {}

  /**
   * The machine's certificate rotated away (./ca-rotation.ts) and its agent restarted on it;
   * then the machine must rejoin by itself within CA_ROTATED_REJOIN_MS: its Machine reports a
   * new key, a write only an identity the API server accepts can make.
   */
  async caRotated(machine: string): Promise<string> {
    const m = this.t.fleet.machines.get(machine)!;
    const before = rotateAway(path.dirname(m.identityKubeconfig), machine);
    if (before === undefined) return "skipped: the machine holds no certificate yet";
    m.crashAgent();
    const w = await this.untilRejoined(machine, (st) => st?.certificateKeyDigest !== before);
    if (w.ok) return `done (${machine} rejoined, proving its key, after ${w.s} s)`;
    this.broken.push({
      rule: "ca-rotation-not-rejoined",
      at: Date.now(),
      machine,
      message: `${machine}'s certificate was re-signed by a CA the API server does not trust ${w.s} s ago and its Machine still reports key ${w.key ?? "(none)"}: it did not rejoin by itself`,
    });
    return `failed: ${machine} not rejoined within ${CA_ROTATED_REJOIN_MS} ms`;
  }

  /**
   * Reads the Machine until `rejoined` holds of its status (it carries a key digest, which only
   * an accepted identity writes) or CA_ROTATED_REJOIN_MS has passed.
   */
  private async untilRejoined(
    machine: string,
    rejoined: (status: Machine["status"]) => boolean,
  ): Promise<{ ok: boolean; s: string; key: string | undefined }> {
    const from = Date.now();
    for (;;) {
      const st = (await this.t.lab.api.machines.get(machine).catch(() => undefined))?.status;
      const s = ((Date.now() - from) / 1000).toFixed(1);
      const key = st?.certificateKeyDigest;
      if (key !== undefined && rejoined(st)) return { ok: true, s, key };
      if (Date.now() - from > CA_ROTATED_REJOIN_MS) return { ok: false, s, key };
      await sleep(STOPPED_POLL_MS);
    }
  }

  /**
   * The machine's network cut until its certificate has expired (and LAPSE_MARGIN_MS more),
   * then healed: it must join again with the bootstrap credential by itself, within
   * CA_ROTATED_REJOIN_MS (a new key on its Machine, written with the new identity).
   */
  async certLapse(machine: string): Promise<string> {
    const m = this.t.fleet.machines.get(machine)!;
    const held = readHeld(path.dirname(m.identityKubeconfig));
    if (held === undefined) return "skipped: the machine holds no certificate yet";
    const relay = this.t.relays.get(machine)!;
    relay.sever();
    // A renewal that raced the cut gives a later end: the cut lasts until the one held then.
    let end = held.notAfterMs;
    while (Date.now() < end + LAPSE_MARGIN_MS) {
      await sleep(Math.max(0, end + LAPSE_MARGIN_MS - Date.now()));
      end = readHeld(path.dirname(m.identityKubeconfig))?.notAfterMs ?? end;
    }
    relay.heal();
    const before = readHeld(path.dirname(m.identityKubeconfig))?.keyDigest;
    // A certificate issued after the lapse: a new key, ending after the lapsed one.
    const w = await this.untilRejoined(
      machine,
      (st) => st?.certificateKeyDigest !== before && Date.parse(st?.certificateExpiry ?? "") > end,
    );
    const lapsedAt = new Date(end).toISOString();
    if (w.ok)
      return `done (${machine}'s certificate lapsed at ${lapsedAt}; it joined again ${w.s} s after the network healed)`;
    this.broken.push({
      rule: "lapse-not-rejoined",
      at: Date.now(),
      machine,
      message: `${machine}'s certificate lapsed at ${lapsedAt} while its network was cut; healed ${w.s} s ago, its Machine still reports key ${w.key ?? "(none)"}: it did not join again by itself`,
    });
    return `failed: ${machine} not joined again within ${CA_ROTATED_REJOIN_MS} ms of the heal`;
  }
}
