// SIGKILL at random points of `liken agent download` (seeded, see test/support/seed.ts): after every kill the target slot is
// withdrawn (or writing) or staged and fully verified, never in between; the running slot is
// untouched; and the next run finishes the job, resuming instead of starting over.
import { afterAll, beforeAll, expect, it } from "vitest";
import { spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { parse, stringify } from "yaml";
import { buildRelease } from "../../src/release/build.js";
import { parseAgentConfig } from "../../src/slots/config.js";
import { readBackArtifacts } from "../../src/slots/stage.js";
import { SlotStore } from "../../src/slots/store.js";
import { digestOf } from "../../src/verify/digest.js";
import { parseRelease, type Release } from "../../src/verify/release.js";
import { seeded } from "../support/seed.js";
import { startFaultServer, type FaultServer } from "./fault-server.js";

const KiB = 1024;
const MiB = 1024 * KiB;
const KILLS = 16;
const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
// The bundle sits two levels under the repository, like src/native/index.ts, so the addon
// is found at the same relative place (build/Release).
const entry = path.join(repo, "build", "liken-test", "agent.mjs");
const root = mkdtempSync(path.join(tmpdir(), "liken-sigkill-"));
const sha = (b: Buffer) => createHash("sha256").update(b).digest("hex");
let server: FaultServer;
let digest = "";
let release: Release;
/** Where every kill lands: a fresh seed each run, printed; LIKEN_TEST_SEED replays one. */
const { random } = seeded("agent SIGKILL points");

beforeAll(async () => {
  // Spawning through tsx costs seconds of compile per process on a busy machine; one esbuild
  // bundle of the real command (test/native/agent-entry.ts) starts in a fraction of that.
  await build({
    entryPoints: [path.join(repo, "test", "native", "agent-entry.ts")],
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    packages: "external",
    outfile: entry,
    logLevel: "error",
  });
  const channel = path.join(root, "channel");
  writeFileSync(path.join(root, "kernel.img"), randomBytes(3 * MiB + 11));
  writeFileSync(path.join(root, "rootfs.img"), randomBytes(10 * MiB + 4097));
  await buildRelease({
    version: "1.0",
    out: channel,
    chunkSize: 64 * KiB,
    artifacts: [
      { name: "kernel", file: path.join(root, "kernel.img") },
      { name: "rootfs", file: path.join(root, "rootfs.img") },
    ],
  });
  // kernel without chunks: its resume across a restart rests on the saved SHA-256 state.
  const file = path.join(channel, "1.0", "release.yaml");
  const doc = parse(readFileSync(file, "utf8")) as { artifacts: { chunks?: unknown }[] };
  delete doc.artifacts[0]!.chunks;
  const bytes = Buffer.from(stringify(doc, { lineWidth: 0 }));
  writeFileSync(file, bytes);
  release = parseRelease(bytes);
  digest = digestOf(bytes);
  server = await startFaultServer(channel);
  server.faults.set("/1.0/kernel.img", { throttle: 4 * MiB });
  server.faults.set("/1.0/rootfs.img", { throttle: 4 * MiB });
});

afterAll(async () => {
  await server.close();
  rmSync(root, { recursive: true, force: true });
  rmSync(path.dirname(entry), { recursive: true, force: true });
});

interface Run {
  code: number | null;
  signal: NodeJS.Signals | null;
  stderr: string;
}

/** Phases a kill is aimed at (the run logs "<phase>: begin"); the kill lands at a random time
 * up to 900 ms after the phase begins. */
const PHASES = ["release", "withdraw", "write", "verify", "stage"];
/** The first kills all hit the write, so that resuming is exercised many times over. */
const WRITE_KILLS = 10;

/** Runs `liken agent download`; with `phase`, SIGKILLs it at a random point of that phase. */
function download(dir: string, phase?: string): Promise<Run> {
  let target = phase === undefined ? undefined : `${phase}: begin`;
  const child = spawn(
    process.execPath,
    [
      entry,
      "agent",
      "download",
      "--config",
      path.join(dir, "agent.yaml"),
      "--source",
      server.url,
      "--version",
      "1.0",
      "--digest",
      digest,
      "--checkpoint-every",
      "256K",
      "--idle-timeout",
      "5000",
    ],
    { cwd: repo, stdio: ["ignore", "ignore", "pipe"] },
  );
  let stderr = "";
  child.stderr.on("data", (d: Buffer) => {
    stderr += d.toString();
    if (target !== undefined && stderr.includes(target)) {
      target = undefined;
      setTimeout(() => child.kill("SIGKILL"), random() * 900);
    }
  });
  return new Promise((resolve) =>
    child.on("exit", (code, signal) => resolve({ code, signal, stderr })),
  );
}

it(`leaves the slot withdrawn or staged-and-verified after ${KILLS} SIGKILLs, then finishes`, async () => {
  const dir = path.join(root, "machine");
  mkdirSync(dir);
  writeFileSync(path.join(dir, "a.img"), Buffer.alloc(MiB, 0x5a));
  const aBefore = sha(readFileSync(path.join(dir, "a.img")));
  writeFileSync(path.join(dir, "b.img"), Buffer.alloc(0));
  truncateSync(path.join(dir, "b.img"), 16 * MiB);
  const yaml = stringify({
    slots: { a: { device: "a.img" }, b: { device: "b.img" } },
    running: "a",
    stateDir: "state",
  });
  writeFileSync(path.join(dir, "agent.yaml"), yaml);
  const store = new SlotStore(parseAgentConfig(yaml, path.join(dir, "agent.yaml")));

  const seen = new Set<string>();
  for (let i = 0; i < KILLS; i++) {
    const phase = i < WRITE_KILLS ? "write" : PHASES[Math.floor(random() * PHASES.length)];
    const run = await download(dir, phase);
    const m = await store.marker("b");
    seen.add(m.state);
    if (m.state === "staged") {
      // Staged means verified: the stored document and every byte on the medium match.
      expect(m.releaseDigest).toBe(digest);
      expect(digestOf((await store.release("b"))!)).toBe(digest);
      expect(await readBackArtifacts(release, store.device("b"))).toEqual([]);
    } else {
      expect(["empty", "withdrawn", "writing"]).toContain(m.state);
      // A run aimed at a phase it never reached (all done before) exits by itself.
      expect(run.signal ?? run.code, `run ${i}: ${run.stderr}`).toBe("SIGKILL");
    }
    expect(sha(readFileSync(path.join(dir, "a.img")))).toBe(aBefore);
  }

  const last = await download(dir);
  expect(last.code, last.stderr).toBe(0);
  const m = await store.marker("b");
  expect(m).toMatchObject({ state: "staged", version: "1.0", releaseDigest: digest });
  expect(await readBackArtifacts(release, store.device("b"))).toEqual([]);
  expect(sha(readFileSync(path.join(dir, "a.img")))).toBe(aBefore);
  // The runs resumed where the last checkpoint left off instead of starting over.
  const resumed = server.log.filter((r) => r.status === 206);
  expect(resumed.length).toBeGreaterThan(0);
  expect(seen.has("writing")).toBe(true);
}, 300_000);
