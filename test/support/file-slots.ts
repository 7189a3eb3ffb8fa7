// A machine's two slots as files in a directory, and the agent config that names them (slot a
// running, state beside them): the native download tests' and the download benches' machine.
import { execFileSync } from "node:child_process";
import { writeFileSync, truncateSync } from "node:fs";
import path from "node:path";
import { stringify } from "yaml";
import { parseAgentConfig, type AgentSlotsConfig } from "../../src/slots/config.js";

/** Each slot's content: bytes, a size (a sparse file of zeros), or a copy of an image file. */
export type SlotContent = Buffer | number | { copyOf: string };

function writeSlot(file: string, content: SlotContent): void {
  if (Buffer.isBuffer(content)) return writeFileSync(file, content);
  // Sparse, as a slot image is published (src/release/sparse.ts): a copy of a 4 GiB slot that
  // is mostly empty takes its used blocks, not 4 GiB for every run of a bench.
  if (typeof content !== "number") {
    execFileSync("cp", ["--sparse=always", content.copyOf, file]);
    return;
  }
  writeFileSync(file, Buffer.alloc(0));
  truncateSync(file, content);
}

export function fileSlots(
  dir: string,
  slots: { a: SlotContent; b: SlotContent },
): AgentSlotsConfig {
  writeSlot(path.join(dir, "a.img"), slots.a);
  writeSlot(path.join(dir, "b.img"), slots.b);
  return parseAgentConfig(
    stringify({
      slots: { a: { device: "a.img" }, b: { device: "b.img" } },
      running: "a",
      stateDir: "state",
    }),
    path.join(dir, "agent.yaml"),
  );
}
