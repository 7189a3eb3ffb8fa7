// The download child as the agent starts it: with the download's Node flags and at a lower CPU
// priority (src/agent/download.ts says why). The entry here is a stand-in that reports what it
// was started with and exits non-zero, so its last stderr line comes back as the failure.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { getPriority, tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import {
  DOWNLOAD_NICE,
  DOWNLOAD_NODE_FLAGS,
  DownloadSupervisor,
  type DownloadEnd,
} from "../../src/agent/download.js";

const dir = mkdtempSync(path.join(tmpdir(), "liken-dl-child-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("the download child", () => {
  it("runs at the download's niceness with the download's Node flags", async () => {
    const entry = path.join(dir, "stand-in.mjs");
    writeFileSync(
      entry,
      `import { getPriority } from "node:os";
// The parent lowers the priority right after the spawn: wait until it shows.
const until = Date.now() + 5000;
while (getPriority() === ${getPriority()} && Date.now() < until) await new Promise((r) => setTimeout(r, 10));
process.stderr.write(JSON.stringify({ nice: getPriority(), flags: process.execArgv }) + "\\n");
process.exit(3);`,
    );
    const ended = new Promise<DownloadEnd>((resolve) => {
      const s = new DownloadSupervisor(entry, resolve);
      s.start(
        {
          config: "/nonexistent/agent.yaml",
          source: "http://127.0.0.1:9",
          release: { version: "1.0", digest: `sha256:${"0".repeat(64)}` },
          running: "a",
        },
        "b",
        1,
      );
    });
    const end = await ended;
    expect(end.kind).toBe("failed");
    const said = JSON.parse((end as { said: string }).said) as { nice: number; flags: string[] };
    expect(said.nice).toBe(DOWNLOAD_NICE); // absolute, as setpriority(2) sets it
    expect(said.flags).toEqual(DOWNLOAD_NODE_FLAGS);
  });
});
