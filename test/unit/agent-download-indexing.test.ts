// The download child's index pass as the agent sees it (src/agent/download.ts): each checkpoint
// of the pass over the running slot restarts the idle clock the download timeout runs on (a
// 4 GiB slot under QEMU TCG takes longer to index than the timeout, issue 50), and the status
// shows the stage Indexing with its percent, the pass's note apart for the Event.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { bootClockMs } from "../../src/agent/clock.js";
import { DownloadSupervisor, type Durable } from "../../src/agent/download.js";

const dir = mkdtempSync(path.join(tmpdir(), "liken-dl-indexing-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Waits until the boot clock has moved past `t`. */
async function after(t: number): Promise<void> {
  while (bootClockMs() <= t) await new Promise((r) => setTimeout(r, 5));
}

describe("an index pass in the download child", () => {
  it("restarts the idle clock at each checkpoint and shows the stage Indexing", async () => {
    const entry = path.join(dir, "sleeper.mjs");
    writeFileSync(entry, "setTimeout(() => {}, 30_000);\n");
    const s = new DownloadSupervisor(entry, () => {});
    s.start(
      {
        config: "/nonexistent/agent.yaml",
        source: "http://127.0.0.1:9",
        release: { version: "2.0", digest: `sha256:${"0".repeat(64)}` },
        running: "a",
      },
      "b",
      1000,
    );
    try {
      let saved: Durable = { done: 0, reused: 0, fetched: 0 };
      const look = () => s.progress(() => Promise.resolve(saved));
      await look();
      const idle0 = s.idleSince!;
      await after(idle0);
      saved = { ...saved, indexing: { done: 100, total: 400 } };
      expect(await look()).toMatchObject({ bytesDone: 0, stage: "Indexing", stagePercent: 25 });
      const idle1 = s.idleSince!;
      expect(idle1).toBeGreaterThan(idle0);
      // No new checkpoint: the clock stands.
      await after(idle1);
      await look();
      expect(s.idleSince).toBe(idle1);
      // The pass ended and found the slot changed: no stage, the note for the Event.
      saved = { ...saved, indexing: { done: 400, total: 400, note: "slot a differs" } };
      const p = await look();
      expect(p).not.toHaveProperty("stage");
      expect(p).toMatchObject({ indexNote: "slot a differs" });
      expect(s.idleSince).toBeGreaterThan(idle1);
    } finally {
      await s.stop();
    }
  });
});
