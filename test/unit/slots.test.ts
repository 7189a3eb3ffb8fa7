import { describe, expect, it } from "vitest";
import { wholeStreamBuffer } from "../../src/slots/artifact.js";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseAgentConfig, runningSlot, slotFromCmdline } from "../../src/slots/config.js";
import {
  decodeMarker,
  encodeMarker,
  MarkerTransitionError,
  nextMarker,
  planStage,
  type Marker,
  type MarkerEvent,
} from "../../src/slots/marker.js";

const D = `sha256:${"b".repeat(64)}`;
const E = `sha256:${"c".repeat(64)}`;
const staged: Marker = { state: "staged", version: "1", releaseDigest: D, verifiedAt: "t0" };
const writing: Marker = { state: "writing", version: "1", releaseDigest: D };

describe("marker transitions", () => {
  const ok: [Marker, MarkerEvent, Marker][] = [
    [{ state: "empty" }, { type: "withdraw" }, { state: "withdrawn" }],
    [staged, { type: "withdraw" }, { state: "withdrawn" }],
    [{ state: "withdrawn" }, { type: "begin", version: "1", releaseDigest: D }, writing],
    [writing, { type: "staged", verifiedAt: "t0" }, staged],
    [staged, { type: "reverified", verifiedAt: "t1" }, { ...staged, verifiedAt: "t1" }],
  ];
  it.each(ok)("%j + %j -> %j", (m, e, want) => expect(nextMarker(m, e)).toEqual(want));

  const refused: [Marker, MarkerEvent][] = [
    [staged, { type: "begin", version: "2", releaseDigest: E }], // must withdraw first
    [{ state: "empty" }, { type: "begin", version: "1", releaseDigest: D }],
    [{ state: "withdrawn" }, { type: "staged", verifiedAt: "t" }], // nothing was written
    [writing, { type: "reverified", verifiedAt: "t" }],
  ];
  it.each(refused)("refuses %j + %j", (m, e) => {
    expect(() => nextMarker(m, e)).toThrowError(MarkerTransitionError);
  });
});

describe("planStage", () => {
  const want = { version: "1", releaseDigest: D };
  it.each([
    [staged, "done"],
    [{ ...staged, releaseDigest: E }, "withdraw-and-write"],
    [writing, "resume"],
    [{ ...writing, version: "2" }, "withdraw-and-write"],
    [{ state: "withdrawn" } as Marker, "withdraw-and-write"],
    [{ state: "empty" } as Marker, "withdraw-and-write"],
  ] as const)("%j -> %s", (m, plan) => expect(planStage(m, want)).toBe(plan));
});

describe("decodeMarker: anything doubtful reads as not staged", () => {
  it.each([
    [undefined, "empty"],
    ["{torn", "withdrawn"],
    ['{"state":"bogus"}', "withdrawn"],
    ['{"state":"staged"}', "withdrawn"],
    [encodeMarker(staged), "staged"],
  ])("%s -> %s", (text, state) => expect(decodeMarker(text).state).toBe(state));
});

describe("agent config", () => {
  it("resolves slot devices against the config file's directory", () => {
    const c = parseAgentConfig(
      "slots:\n  a: { device: /dev/sda2 }\n  b: { device: b.img }\nstateDir: state\nother: kept for other modules\n",
      "/etc/liken/agent.yaml",
    );
    expect(c.slots).toEqual({ a: { device: "/dev/sda2" }, b: { device: "/etc/liken/b.img" } });
    expect(c.stateDir).toBe("/etc/liken/state");
    expect(c.running).toBeUndefined();
    expect(c.cmdline).toBe("/proc/cmdline");
  });
  it("reads the running slot from the config's cmdline file, the agent's setting", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "liken-cmdline-"));
    try {
      writeFileSync(path.join(dir, "cmdline"), "root=/dev/vda2 liken.slot=b quiet\n");
      const c = parseAgentConfig(
        "slots:\n  a: { device: a.img }\n  b: { device: b.img }\nstateDir: s\ncmdline: ./cmdline\n",
        path.join(dir, "agent.yaml"),
      );
      expect(c.cmdline).toBe(path.join(dir, "cmdline"));
      expect(await runningSlot(c)).toBe("b");
      writeFileSync(path.join(dir, "cmdline"), "quiet\n");
      await expect(runningSlot(c)).rejects.toThrow(/cmdline has no liken.slot=a\|b/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
  it.each([
    [
      "slots:\n  a: { device: x }\nstateDir: s\n",
      /slots\.b must be a mapping \{device\} \(it is missing\)/,
    ],
    ["slots:\n  a: { device: x }\n  b: {}\nstateDir: s\n", /slots\.b\.device must name/],
    [
      "slots:\n  a: { device: b.img }\n  b: { device: ./b.img }\nstateDir: s\n",
      /slots\.b\.device is the same as slots\.a\.device \(\/etc\/liken\/b\.img\)/,
    ],
    [
      "slots:\n  a: { device: x }\n  b: { device: x }\nstateDir: s\n",
      /is the same as slots\.a\.device/,
    ],
    [
      "slots:\n  a: { device: x }\n  b: { device: y, size: 3 }\nstateDir: s\n",
      /slots\.b\.size is not a known field/,
    ],
    [
      "slots:\n  a: { device: x }\n  c: { device: y }\nstateDir: s\n",
      /slots\.c is not a slot name/,
    ],
    [
      "slots:\n  a: { device: x }\n  b: { device: y }\nrunning: c\nstateDir: s\n",
      /running must be a or b/,
    ],
    ["slots:\n  a: { device: x }\n  b: { device: y }\n", /stateDir must name a directory/],
  ])("refuses %j", (text, message) => {
    expect(() => parseAgentConfig(text, "/etc/liken/agent.yaml")).toThrowError(message);
  });
  it.each([
    ["BOOT_IMAGE=/vmlinuz root=/dev/sda2 liken.slot=b quiet", "b"],
    ["liken.slot=a", "a"],
    ["xliken.slot=a", undefined],
    ["liken.slot=c", undefined],
  ])("reads %j from the kernel command line", (cmdline, slot) => {
    expect(slotFromCmdline(cmdline)).toBe(slot);
  });
});

describe("wholeStreamBuffer", () => {
  it.each([
    [64 * 1024 * 1024, 0, 4 * 1024 * 1024],
    [256 * 1024, 0, 256 * 1024],
    [300 * 1024, 0, 256 * 1024],
    [64 * 1024 * 1024, 256 * 1024, 256 * 1024], // resume offset from a smaller buffer
    [64 * 1024 * 1024, 12 * 1024 * 1024, 4 * 1024 * 1024],
  ])("checkpoint every %i, resume at %i -> %i", (every, start, want) => {
    expect(wholeStreamBuffer(every, start)).toBe(want);
  });
});

describe("markers: what a refusal says, and what decodes as what", () => {
  it.each([
    [
      { state: "staged" },
      { type: "begin", version: "2", releaseDigest: E },
      "begin from staged: withdraw first",
    ],
    [
      { state: "withdrawn" },
      { type: "staged", verifiedAt: "t" },
      "staged from withdrawn: only a finished write stages",
    ],
    [{ state: "writing" }, { type: "reverified", verifiedAt: "t" }, "reverified from writing"],
    [{ state: "empty" }, { type: "bogus" }, 'unknown event {"type":"bogus"}'],
  ] as [Marker, MarkerEvent, string][])("%j + %j: %s", (m, e, msg) => {
    expect(() => nextMarker(m, e)).toThrowError(msg);
  });

  it("an unknown state has no stage plan", () => {
    const bogus = { state: "bogus" } as unknown as Marker;
    expect(() => planStage(bogus, { version: "1", releaseDigest: D })).toThrowError(
      "unknown state bogus",
    );
  });

  it.each([
    ['{"state":"empty"}', { state: "empty" }],
    ['{"state":"withdrawn"}', { state: "withdrawn" }],
    [JSON.stringify(writing), writing],
    ['{"state":"writing","releaseDigest":"x"}', { state: "withdrawn" }],
    ['{"state":"writing","version":"1"}', { state: "withdrawn" }],
    ['{"state":"staged","version":"1"}', { state: "withdrawn" }],
    ['{"state":"staged","releaseDigest":"x"}', { state: "withdrawn" }],
  ])("%s -> %j", (text, want) => expect(decodeMarker(text)).toEqual(want));
});
