// The edit sequences whose results Debian's grub-editenv produced in this folder (`<name>.env`).
// generate.ts replays them with the real tool; test/unit/bootloader-grubenv.test.ts replays them
// with liken's grubenv.ts and compares bytes, and regenerates them to prove the files are current.
export type Op = { set: [string, string] } | { unset: string };

export interface GoldenCase {
  name: string;
  ops: Op[];
  /** The last op fails in grub-editenv (the block cannot grow); the file keeps its bytes. */
  lastFails?: boolean;
}

const big = "x".repeat(880);

export const CASES: GoldenCase[] = [
  { name: "created", ops: [] },
  { name: "saved-entry", ops: [{ set: ["saved_entry", "a"] }] },
  {
    name: "unset-middle",
    ops: [{ set: ["a", "1"] }, { set: ["b", "2"] }, { set: ["c", "3"] }, { unset: "b" }],
  },
  { name: "unset-missing", ops: [{ set: ["a", "1"] }, { unset: "zz" }] },
  { name: "escapes", ops: [{ set: ["v", "back\\slash\nnew line=eq"] }, { set: ["w", "after"] }] },
  {
    name: "shrink-grow",
    ops: [
      { set: ["x", "long-value-here"] },
      { set: ["y", "2"] },
      { set: ["x", "s"] },
      { set: ["x", "a-much-longer-value-than-before"] },
    ],
  },
  { name: "empty-value", ops: [{ set: ["next_entry", "b"] }, { set: ["next_entry", ""] }] },
  {
    name: "near-full-shrink",
    ops: [{ set: ["big", big] }, { set: ["t", "1"] }, { set: ["big", "small"] }],
  },
  {
    name: "no-space",
    ops: [{ set: ["big", big] }, { set: ["more", "y".repeat(100)] }],
    lastFails: true,
  },
  {
    name: "liken-trial-consumed",
    ops: [
      { set: ["liken_seq", "10000007"] },
      { set: ["saved_entry", "a"] },
      { set: ["liken_trial", ""] },
      { set: ["next_entry", "b"] },
      { set: ["liken_end", "10000007"] },
      { set: ["next_entry", ""] },
      { set: ["liken_trial", "b"] },
    ],
  },
];
