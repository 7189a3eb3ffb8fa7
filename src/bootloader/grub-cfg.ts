// The grub.cfg liken installs on the ESP. It is the other half of grub.ts's two-copy protocol
// and the program firmware.ts plays step by step; change the three together.
import type { Slot } from "./types.js";

export interface GrubSlotEntry {
  /** GRUB device of the slot's filesystem, e.g. `(hd0,gpt2)`. */
  root: string;
  kernel: string;
  initrd: string;
  /** Kernel arguments of every boot of this slot; liken adds `liken.slot=<slot>`. */
  args: string;
}

export interface GrubConfigOptions {
  /** GRUB path of the directory holding the two environment copies, e.g. `(hd0,gpt1)/EFI/liken`. */
  envDir: string;
  slots: Record<Slot, GrubSlotEntry>;
  /**
   * Added on the trial boot only: `panic=N` so a panicking trial reboots (into the default), and
   * whatever arms a watchdog for a hang.
   */
  trialArgs: string;
  /** Serial console for GRUB itself (the testbed reads it). */
  serial: boolean;
}

function entry(id: string, slot: Slot, e: GrubSlotEntry, extra: string): string {
  const args = [`liken.slot=${slot}`, e.args, extra].filter((s) => s !== "").join(" ");
  return [
    `menuentry "liken slot ${slot}${extra === "" ? "" : " (trial)"}" --id ${id} {`,
    `  echo "liken-grub: booting ${id}"`,
    `  linux ${e.root}${e.kernel} ${args}`,
    `  initrd ${e.root}${e.initrd}`,
    `}`,
  ].join("\n");
}

export function grubConfig(o: GrubConfigOptions): string {
  const head = `# Installed by liken: boot-once trials with fallback (src/bootloader/grub-cfg.ts).
set timeout=0
${o.serial ? "serial --unit=0 --speed=115200\nterminal_input serial\nterminal_output serial\nset gfxpayload=text\n" : ""}
# The current copy of the environment: grubenv if its first and last lines (liken_seq,
# liken_end) agree, else grubenv2. liken writes grubenv2 first, then grubenv.
set liken_dir="${o.envDir}"
set liken_env=""
for liken_f in grubenv2 grubenv; do
  unset liken_seq
  unset liken_end
  if load_env --file "$liken_dir/$liken_f" liken_seq liken_end; then
    if [ -n "$liken_seq" -a "$liken_seq" = "$liken_end" ]; then
      set liken_env="$liken_dir/$liken_f"
    fi
  fi
done

set default=a
set liken_boot=normal
if [ -n "$liken_env" ]; then
  load_env --file "$liken_env" saved_entry next_entry liken_trial
  if [ "$saved_entry" = b ]; then
    set default=b
  fi
  if [ "$next_entry" = a -o "$next_entry" = b ]; then
    set liken_next="$next_entry"
    set next_entry=
    set liken_trial="$liken_next"
    # Boot the trial only once GRUB recorded that it started it: with an environment GRUB
    # cannot write, the trial would boot on every boot and never fall back.
    if save_env --file "$liken_env" next_entry liken_trial; then
      set default="trial-$liken_next"
      set liken_boot=trial
    fi
  fi
fi
# A trial entry that fails to load (missing kernel) falls back at once to the default slot.
if [ "$saved_entry" = b ]; then set fallback=b; else set fallback=a; fi
echo "liken-grub: env=$liken_env default=$default boot=$liken_boot"
`;
  const entries = (["a", "b"] as const).flatMap((s) => [
    entry(s, s, o.slots[s], ""),
    entry(`trial-${s}`, s, o.slots[s], o.trialArgs),
  ]);
  return `${head}\n${entries.join("\n\n")}\n`;
}
