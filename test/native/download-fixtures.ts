// The machines of the native download tests (download-faults, adaptive-download,
// pack-download): each a fresh folder whose two slots are files (test/support/file-slots.ts),
// slot a running and slot b the download's target, with a download request of the test
// file's defaults that keeps the download's log lines. Slot a is checked after each test: a
// download never writes the running slot, whatever the server did.
import { createHash } from "node:crypto";
import { mkdirSync, readFileSync, rmSync } from "node:fs";
import path from "node:path";
import { afterAll, afterEach, expect } from "vitest";
import type { AgentSlotsConfig } from "../../src/slots/config.js";
import type { DownloadRequest } from "../../src/slots/stage.js";
import { SlotStore } from "../../src/slots/store.js";
import { fileSlots } from "../support/file-slots.js";
import type { FaultServer } from "./fault-server.js";

export interface DownloadMachine {
  /** Its number in the file (its folder is `m${n}`): a name no other test's machine has. */
  n: number;
  config: AgentSlotsConfig;
  /** A request of the file's defaults, with `over` on top; its log lines go to `messages`. */
  req: (over?: Partial<DownloadRequest>) => DownloadRequest;
  messages: string[];
  store: SlotStore;
  /** Slot b's file. */
  b: string;
}

const sha256 = (bytes: Buffer): string => createHash("sha256").update(bytes).digest("hex");

/**
 * A test file's machine maker: each call makes `m1`, `m2`, ... under `root` with slot a holding
 * `a` and slot b `b` bytes of zeros. The requests download from `server` (the file's, serving
 * root's channel/, started in its beforeAll) what `request` says (read at each request). After
 * each test the server forgets its faults and log, and slot a of the last machine made must
 * still hold the bytes it was made with; after the file the server closes and `root` goes.
 */
export function downloadMachines(
  root: string,
  o: {
    server: () => FaultServer;
    request: () => Pick<DownloadRequest, "version" | "digest" | "fetch" | "attempts">;
  },
): (slots: { a: Buffer; b: number }) => DownloadMachine {
  let n = 0;
  let slotA = "";
  let aBefore = "";
  afterEach(() => {
    o.server().reset();
    // The running slot is never written.
    expect(sha256(readFileSync(slotA))).toBe(aBefore);
  });
  afterAll(async () => {
    await o.server().close();
    rmSync(root, { recursive: true, force: true });
  });
  return (slots) => {
    const dir = path.join(root, `m${++n}`);
    mkdirSync(dir);
    slotA = path.join(dir, "a.img");
    aBefore = sha256(slots.a);
    const config = fileSlots(dir, slots);
    const messages: string[] = [];
    const req = (over: Partial<DownloadRequest> = {}): DownloadRequest => ({
      config,
      source: o.server().url,
      ...o.request(),
      log: (m) => messages.push(m),
      ...over,
    });
    return {
      n,
      config,
      req,
      messages,
      store: new SlotStore(config),
      b: path.join(dir, "b.img"),
    };
  };
}
