// The agent's call before arming a trial: the staged release's kernel and initrd into the place
// the bootloader loads them from, when that is not the slot (systemd-boot: the ESP; see
// src/bootloader/boot-files.ts). Runs after the slot read back and matched, every attempt anew.
import type { Bootloader, Slot } from "../bootloader/types.js";
import type { SlotStore } from "../slots/store.js";
import { parseRelease } from "../verify/release.js";
import { AgentError } from "./errors.js";

export async function installStagedBootFiles(
  bl: Bootloader,
  store: Pick<SlotStore, "device" | "release">,
  slot: Slot,
): Promise<void> {
  if (bl.installBootFiles === undefined) return;
  const doc = await store.release(slot);
  if (doc === undefined) {
    throw new AgentError(
      "LIKEN_AGENT_SLOT_CHECK_FAILED",
      `slot ${slot} has no stored release.yaml to take its kernel and initrd from; nothing was ` +
        "installed, and the slot is read back again at the next look",
      { retryable: true, context: { slot } },
    );
  }
  await bl.installBootFiles(slot, { device: store.device(slot), release: parseRelease(doc) });
}
