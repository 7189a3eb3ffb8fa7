// What runs on a simulated machine beneath its agent: power and reboots, the bootloader's
// boot-once and its fall-back from a trial that does not come up, the kubelet's Node posts, and
// the download beside the agent's loop. Each is one step per simulated second (world.ts).
import type { Sim } from "./machine.js";
import { at, type World } from "./world-state.js";

export function bootUp(w: World, s: Sim): void {
  const { history } = w;
  s.powered = true;
  s.agentUp = true;
  s.bootSeq++;
  s.bootId = `${s.name}-boot-${s.bootSeq}`;
  s.bootAt = w.now;
  let slot = s.boot.defaultSlot;
  let trial = false;
  if (s.boot.armed !== null) {
    // Boot-once: the armed entry is consumed as it starts (the bootloader's own record).
    slot = s.boot.armed;
    s.boot.started = slot;
    s.boot.armed = null;
    trial = true;
  }
  history.push({ kind: "boot", at: at(w), machine: s.name, bootId: s.bootId, slot, trial });
  const rel = s.slots[slot].release;
  if (
    trial &&
    (s.slots[slot].bytes !== rel?.digest || w.shape.badBoot.includes(rel?.digest ?? ""))
  ) {
    // The trial kernel does not come up: the watchdog resets, the bootloader falls back.
    s.bootSeq++;
    s.bootId = `${s.name}-boot-${s.bootSeq}`;
    slot = s.boot.defaultSlot;
    history.push({
      kind: "boot",
      at: at(w),
      machine: s.name,
      bootId: s.bootId,
      slot,
      trial: false,
    });
  }
  s.running = slot;
  if (s.node !== undefined) s.node.postsIn = w.rng.int(2, 15);
}

export function kubeletTick(w: World, s: Sim): void {
  if (!s.powered) return;
  if (s.node === undefined) s.node = { bootId: "", heartbeatAt: 0, postsIn: w.rng.int(2, 15) };
  if (s.node.postsIn > 0) {
    s.node.postsIn--;
    return;
  }
  if (s.node.bootId !== s.bootId) {
    s.node.bootId = s.bootId;
    w.history.push({ kind: "node", at: at(w), name: s.name, ready: true, bootId: s.bootId });
    w.history.push({ kind: "rejoin", at: at(w), machine: s.name, bootId: s.bootId });
  }
  s.node.heartbeatAt = w.now;
}

/** A download runs beside the agent's loop: one step of it per second. */
export function downloadTick(w: World, s: Sim): void {
  const dl = s.download;
  if (!s.powered || !s.agentUp || dl === undefined || --dl.left > 0) return;
  // A bad copy (a flipped byte on the way): the slot's bytes differ from the release.
  const bytes = w.rng.chance(0.005) ? "sha256:corrupt" : dl.release.digest;
  s.slots[dl.slot] = { release: dl.release, bytes, state: "staged" };
  w.history.push({
    kind: "slot-write",
    at: at(w),
    machine: s.name,
    slot: dl.slot,
    digest: dl.release.digest,
  });
  s.download = undefined;
}

export function reboot(w: World, s: Sim): void {
  w.history.push({ kind: "reboot", at: at(w), machine: s.name, bootId: s.bootId, cause: "agent" });
  s.powered = false;
  s.download = undefined;
  s.downFor = w.rng.int(10, 40);
}
