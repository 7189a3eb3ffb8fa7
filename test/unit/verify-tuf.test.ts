// The signing side and the TUF client together, over a real local HTTP server: a good channel
// is read, and the client's checks hold (each fault is tested on the control plane in
// test/integration/operator-trust.test.ts).
import { afterEach, describe, expect, it } from "vitest";
import { recallRelease, rotateKey } from "../../src/release/tuf.js";
import { classify, readSignedChannel, type TrustedFiles } from "../../src/verify/tuf.js";
import { testChannel, type TestChannel } from "../support/tuf-channel.js";

let ch: TestChannel | undefined;
afterEach(async () => {
  await ch?.close();
  ch = undefined;
});

const read = (c: TestChannel, trusted: TrustedFiles | undefined, now = new Date()) =>
  readSignedChannel({
    metadataUrl: new URL("/tuf/", c.source),
    trusted,
    rootDigest: c.rootDigest,
    channel: "stable",
    now,
    acceptExpiredSeconds: 0,
    pick: (rs) => rs.at(-1),
  });

describe("signed channel", () => {
  it("publishes, reads, recalls and rotates", async () => {
    ch = await testChannel();
    const d1 = await ch.publish("2026.10.10-001");
    const first = await read(ch, undefined);
    if (!first.ok) throw new Error(first.fault.message);
    expect(first.verified?.digest).toBe(d1);
    expect(first.releases.map((r) => r.version)).toEqual(["2026.10.10-001"]);

    await recallRelease({
      repo: ch.repo,
      keys: ch.keys,
      channel: "stable",
      version: "2026.10.10-001",
      reason: "boot loop",
    });
    const second = await read(ch, first.files);
    if (!second.ok) throw new Error(second.fault.message);
    expect(second.releases[0]?.recalled?.reason).toBe("boot loop");

    await rotateKey({ repo: ch.repo, keys: ch.keys, role: "targets" });
    await rotateKey({ repo: ch.repo, keys: ch.keys, role: "root" });
    const third = await read(ch, second.files);
    if (!third.ok) throw new Error(third.fault.message);
    expect((JSON.parse(third.files.root) as { signed: { version: number } }).signed.version).toBe(
      3,
    );
  });

  it("refuses a root that is not the pinned one", async () => {
    ch = await testChannel();
    const r = await readSignedChannel({
      metadataUrl: new URL("/tuf/", ch.source),
      trusted: undefined,
      rootDigest: `sha256:${"0".repeat(64)}`,
      channel: "stable",
      now: new Date(),
      acceptExpiredSeconds: 0,
      pick: () => undefined,
    });
    expect(r.ok ? "ok" : r.fault.reason).toBe("RootPinMismatch");
  });

  it("judges expiry on the given clock (far future: expired; accepted expiry: read; the seam into tuf-js)", async () => {
    ch = await testChannel();
    await ch.publish("2026.10.10-001");
    const future = new Date(Date.now() + 2 * 24 * 3600_000);
    const r = await read(ch, undefined, future);
    expect(r.ok ? "ok" : `${r.fault.reason} ${r.fault.role}`).toBe("MetadataExpired timestamp");
    const accepted = await readSignedChannel({
      metadataUrl: new URL("/tuf/", ch.source),
      trusted: undefined,
      rootDigest: ch.rootDigest,
      channel: "stable",
      now: future,
      acceptExpiredSeconds: 3 * 24 * 3600,
      pick: () => undefined,
    });
    expect(accepted.ok).toBe(true);
  });

  it.each([
    ["ExpiredMetadataError", "timestamp.json is expired", "timestamp", "MetadataExpired"],
    ["BadVersionError", "Expected version 2, got 3", "root", "RootRotationInvalid"],
    [
      "BadVersionError",
      "New snapshot version 1 is less than current version 2",
      "timestamp",
      "MetadataRollback",
    ],
    ["UnsignedMetadataError", "targets was signed by 1/2 keys", "targets", "SignatureThreshold"],
    ["LengthOrHashMismatchError", "Expected hash aa but got bb", "target", "LengthOrHashMismatch"],
    ["DownloadHTTPError", "GET x: HTTP 503", "timestamp", "ChannelUnreachable"],
    ["ValueError", "expected 'root', got x", "root", "MetadataInvalid"],
  ] as const)("classifies %s (%s) of %s as %s", (cls, msg, role, reason) => {
    const C = { [cls]: class extends Error {} }[cls]!;
    Object.defineProperty(C, "name", { value: cls });
    expect(classify(new C(msg), role).reason).toBe(reason);
  });
});
