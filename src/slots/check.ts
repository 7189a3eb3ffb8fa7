// Re-verifying a staged slot (`liken agent verify`, and the agent before each trial): the
// stored release document must still hash to the marker's digest, and every artifact read
// back from the medium must match it. A slot that fails is withdrawn: nothing unverified
// stays staged.
import { deviceInfo } from "../native/index.js";
import { digestOf } from "../verify/digest.js";
import { parseRelease } from "../verify/release.js";
import {
  otherSlot,
  runningSlot,
  SLOT_NAMES,
  type AgentSlotsConfig,
  type SlotName,
} from "./config.js";
import { SlotError } from "./errors.js";
import type { Marker } from "./marker.js";
import { readBackArtifacts } from "./stage.js";
import { SlotStore } from "./store.js";

export interface SlotStatus {
  slot: SlotName;
  device: string;
  running: boolean;
  state: Marker["state"];
  version?: string;
  releaseDigest?: string;
  verifiedAt?: string;
  deviceSize?: number;
  /** writing: bytes durable so far, over all artifacts. */
  writtenBytes?: number;
}

export async function slotStatus(
  config: AgentSlotsConfig,
  running?: string,
): Promise<SlotStatus[]> {
  const store = new SlotStore(config);
  const run = await runningSlot(config, running).catch(() => undefined);
  const out: SlotStatus[] = [];
  for (const slot of SLOT_NAMES) {
    const m = await store.marker(slot);
    const s: SlotStatus = {
      slot,
      device: store.device(slot),
      running: run === slot,
      state: m.state,
    };
    if (m.version) s.version = m.version;
    if (m.releaseDigest) s.releaseDigest = m.releaseDigest;
    if (m.verifiedAt) s.verifiedAt = m.verifiedAt;
    try {
      s.deviceSize = deviceInfo(s.device).size;
    } catch {
      // A missing device is shown without a size; status must never fail on it.
    }
    if (m.state === "writing" && m.releaseDigest) {
      const p = await store.progress(slot, m.releaseDigest);
      s.writtenBytes = Object.values(p.artifacts).reduce((n, a) => n + a.offset, 0);
    }
    out.push(s);
  }
  return out;
}

export interface VerifyResult {
  slot: SlotName;
  version: string;
  ok: boolean;
  problems: string[];
}

/** Re-reads the staged slot (default: the one not running) and checks the whole chain. */
export async function verifyStagedSlot(
  config: AgentSlotsConfig,
  opts: { slot?: SlotName; running?: string; direct?: boolean } = {},
): Promise<VerifyResult> {
  const store = new SlotStore(config);
  const slot = opts.slot ?? otherSlot(await runningSlot(config, opts.running));
  const m = await store.marker(slot);
  if (m.state !== "staged" || !m.version || !m.releaseDigest) {
    throw new SlotError(
      "LIKEN_SLOT_NOT_STAGED",
      `slot ${slot} holds no staged release (it is ${m.state}); nothing to verify`,
      {
        context: { slot, state: m.state },
      },
    );
  }
  const problems: string[] = [];
  const doc = await store.release(slot);
  if (!doc || digestOf(doc) !== m.releaseDigest) {
    problems.push(
      `the stored release.yaml ${doc ? `has digest ${digestOf(doc)}` : "is missing"}, the marker says ${m.releaseDigest}`,
    );
  } else {
    const bad = await readBackArtifacts(parseRelease(doc), store.device(slot), opts.direct);
    for (const b of bad) problems.push(`artifact ${b.name} reads back as ${b.got}`);
  }
  if (problems.length === 0) {
    await store.transition(slot, { type: "reverified", verifiedAt: new Date().toISOString() });
  } else {
    await store.transition(slot, { type: "withdraw" });
  }
  return { slot, version: m.version, ok: problems.length === 0, problems };
}
