// The slots part of the agent's config file (agent.yaml), declared once: src/slots/config.ts
// checks it with this, src/agent/config-schema.ts makes it part of the whole file's schema
// (the one published in config/schema/agent.schema.json for editors).
import { strict, text, z } from "../schema/index.js";

export const SLOT_NAMES = ["a", "b"] as const;
export type SlotName = (typeof SLOT_NAMES)[number];

const slot = strict(
  {
    device: text("name a block device, partition or file").describe(
      "Block device, partition or regular file holding the slot (relative: against this file's directory).",
    ),
  },
  { notMapping: "must be a mapping {device}" },
);

/** The keys of agent.yaml the slots module owns; other keys belong to other modules. */
export const slotsSection = {
  slots: strict(
    { a: slot, b: slot },
    { unknown: "a slot name (a or b)", notMapping: "must map a and b to devices" },
  ).describe("The two slots, a and b, each on its own device."),
  stateDir: text("name a directory for slot metadata").describe(
    "Slot metadata: markers, stored release documents, download progress (relative: against this file's directory).",
  ),
  running: z
    .enum(SLOT_NAMES, { error: "must be a or b" })
    .optional()
    .describe("The running slot; normally absent: the agent reads liken.slot= from cmdline."),
  cmdline: text("name the file holding the kernel command line")
    .optional()
    .describe("The file to read liken.slot= from (default /proc/cmdline)."),
};

/** The slots section as the slots module reads it: other modules' keys pass through. */
export const slotsFile = z.looseObject(slotsSection, {
  error: (iss) => (iss.code === "invalid_type" ? "must be a mapping of settings" : undefined),
});
export type SlotsFile = z.output<typeof slotsFile>;
