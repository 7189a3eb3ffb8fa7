// bench:delta: adaptive downloads against the anchors, on the machine image, in the same run.
//
//   npm run bench:delta -- [--dir /tmp] [--old v1.img --new v2.img] [--repeat 3] [--cases small]
//
// (--old/--new: two images to measure instead of the machine image's v1 and v2, or two release
// directories (<channel>/<version>/, e.g. two `liken release build --from-image` releases): a
// release is measured as the slot it makes, every artifact at its offset, and only the small
// case runs, with the goal for releases: liken <= 1.1 x limit + index and no more bytes than
// desync; --repeat: liken's full and adaptive downloads are timed that many times,
// alternating, and the medians kept; --cases: which of small, large, nothing to run.)
//
// The running slot holds the machine image's v1, as liken staged it (its chunk index kept) (testbed/machine/releases.ts: ext4 built with
// mke2fs -d; cached, built on first use). Three new releases of the same size:
//   small    the image's v2 (another /etc/os-release and initrd: a monthly fix)
//   large    v2 with a quarter of its 4 KiB blocks replaced, in runs of 1-64 blocks (many
//            upgraded packages)
//   nothing  random bytes: nothing reusable (adaptive must be no slower than full)
// For each, over loopback HTTP (liken's channel server, counting bodies and bytes):
//   full      liken's plain download (adaptive off)
//   liken     the adaptive download, seeded from the running slot: the index pages that
//             differ from the running release's, the chunks as zstd frames from the pack
//             (docs/releases.md, "Packs and index pages")
//   desync    desync extract from an HTTP chunk store (its default 16:64:256 KiB chunks, zstd)
//             with the running image as its seed
//   limit     the bytes of the new image's 4 KiB chunks found nowhere in the old one
// One line per case, then the last line (the small case) with the goal over every case:
//   liken's bytes, index included, at most desync's in every case (and at most 1.05 x limit +
//   index); fewer requests than desync in the large case; time <= full when nothing is reused
//   (within 1.1: time-vs-full is the median of the ratios of each full run and the liken run
//   right after it, which share the machine's load; cpu-vs-full the same for the process's
//   CPU time, server included; decided-in how long liken took to decide to download in full;
//   phases-ms-full/liken the median of each phase of downloadRelease, full runs / liken runs:
//   release, withdraw, write (liken's decision is at its start), verify, stage; each run's own
//   line goes to stderr; load the 1-minute load average when the case ended). A case whose
//   goal is not met says why on its line and again in the last line's "cases:"; for the
//   nothing case that is the phase that took the time (paired medians, liken minus full).
// "index" is what liken fetched of it (top index, pages, or the plain index), from the server's
// count.
import { execFile, execFileSync } from "node:child_process";
import { promisify } from "node:util";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { buildSlots } from "../testbed/machine/releases.js";
import { ensureTool } from "../src/controlplane/tools.js";
import { buildRelease } from "../src/release/build.js";
import { serveChannel } from "../src/release/serve.js";
import { downloadRelease } from "../src/slots/stage.js";
import { fileSlots } from "../test/support/file-slots.js";
import { SlotStore } from "../src/slots/store.js";
import { keptPages, keptTop } from "../src/slots/paged-index.js";
import { INDEX_CHUNK } from "../src/verify/chunk-index.js";
import { copySparse } from "../src/release/sparse.js";
import { digestOfFile, largeChange, missingOf, randomFile, sizeOf, slotOf } from "./delta-files.js";

const MiB = 1024 * 1024;
const { values: args } = parseArgs({
  options: {
    dir: { type: "string", default: tmpdir() },
    old: { type: "string" },
    new: { type: "string" },
    repeat: { type: "string", default: "3" },
    cases: { type: "string" },
  },
});
const repeat = Math.max(1, Number(args.repeat));
const work = mkdtempSync(path.join(args.dir!, "liken-bench-delta-"));
const log = (s: string): void => void process.stderr.write(`${s}\n`);

const isRelease = (p: string | undefined): boolean =>
  p !== undefined && existsSync(path.join(p, "release.yaml"));

/** The bytes to fetch in at most `requests` ranges: the limit plus the smallest gaps merged. */
function bytesForRequests(missing: boolean[], requests: number): number {
  const runs: [number, number][] = [];
  missing.forEach((m, i) => {
    if (!m) return;
    const last = runs[runs.length - 1];
    if (last && last[1] === i - 1) last[1] = i;
    else runs.push([i, i]);
  });
  const gaps = runs.slice(1).map((r, k) => r[0] - runs[k]![1] - 1);
  gaps.sort((a, b) => a - b);
  const merged = gaps.slice(0, Math.max(0, runs.length - requests)).reduce((n, g) => n + g, 0);
  return (missing.filter(Boolean).length + merged) * INDEX_CHUNK;
}

/** One timed download. */
interface Run {
  s: number;
  /** The process's CPU seconds over it (user + system, every thread, the server included). */
  cpu: number;
  /** Seconds until liken logged that it downloads the artifact in full (when it did). */
  decided?: number;
  /** Each phase of downloadRelease (release, withdraw, write, verify, stage), in ms. */
  phases: Record<string, number>;
  served: Served;
}

interface Served {
  bytes: number;
  requests: number;
  /** Of which the index's (top, pages, plain index). */
  index: number;
}

const mib = (n: number): string => `${(n / MiB).toFixed(1)}M`;

/** Where the goal is not met, the measured reasons (none: met). */
function goalMisses(m: {
  releases: boolean;
  name: string;
  limit: number;
  indexBytes: number;
  missing: boolean[];
  liken: Run;
  full: Run;
  /** Paired medians: liken's wall and CPU time over the full run's just before it. */
  timeRatio: number;
  cpuRatio: number;
  /** The full runs' shortest and longest wall times (the load's spread). */
  fullRange: [number, number];
  /** Each phase's median of the paired differences, liken's run minus the full run's, ms. */
  phaseDelta: Record<string, number>;
  desync: Served;
  desyncIndex: number;
}): string[] {
  const misses: string[] = [];
  const bytes = m.liken.served.bytes;
  if (m.releases) {
    // Two releases of images one package apart (docs/releases.md, "A release from a container
    // image"): at most 1.1 x the new chunks plus the index, and no more than desync.
    if (bytes > 1.1 * m.limit + m.indexBytes) misses.push("bytes over 1.1 x limit + index");
    if (bytes > m.desync.bytes) {
      misses.push(
        `more bytes than desync (${mib(m.desync.bytes)}, of which its index ${mib(m.desyncIndex)})`,
      );
    }
    return misses;
  }
  if (bytes > 1.05 * m.limit + m.indexBytes) misses.push("bytes over 1.05 x limit");
  if (bytes > m.desync.bytes) misses.push(`more bytes than desync (${mib(m.desync.bytes)})`);
  if (m.name === "large" && m.liken.served.requests >= m.desync.requests) {
    const need = bytesForRequests(m.missing, m.desync.requests - 1);
    misses.push(
      `requests: fewer than desync's ${m.desync.requests} would fetch ${(need / m.limit).toFixed(2)} x the limit (the changes lie in ${m.liken.served.requests}+ separate runs)`,
    );
  }
  if (m.name === "nothing" && m.timeRatio > 1.1) {
    // The measured reason: what liken did beyond the full download, against the load's spread.
    const decided =
      m.liken.decided === undefined
        ? "it did not decide to download in full"
        : `it decided to download in full after ${m.liken.decided.toFixed(2)} s`;
    misses.push(
      `slower than full: ${m.timeRatio.toFixed(2)} x its wall time with ${m.cpuRatio.toFixed(2)} x its CPU time; ${decided}; ` +
        `by phase (median of liken's minus the full run's): ${Object.entries(m.phaseDelta)
          .map(([k, v]) => `${k} ${v >= 0 ? "+" : ""}${v} ms`)
          .join(", ")}; ` +
        `the full runs took ${m.fullRange[0].toFixed(2)}-${m.fullRange[1].toFixed(2)} s at load ${loadavg()[0]!.toFixed(1)}`,
    );
  }
  return misses;
}

/** The phases of a run, in ms: "release=3 write=640 verify=150 stage=4". */
const phaseField = (phases: Record<string, number>): string =>
  Object.entries(phases)
    .map(([k, v]) => `${k}=${v}`)
    .join(" ");

/** The middle value of `xs` (the upper one of an even count). */
const middle = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** Every phase any of the runs logged, in the order first seen. */
const phaseNames = (runs: Run[]): string[] => [
  ...new Set(runs.flatMap((r) => Object.keys(r.phases))),
];

/** Each phase's median over the full runs and over the liken runs, in ms: "write 574/869". */
function phaseMedians(fulls: Run[], likens: Run[]): string {
  const of = (runs: Run[], n: string) => middle(runs.map((r) => r.phases[n] ?? 0));
  return phaseNames([...fulls, ...likens])
    .map((n) => `${n}=${of(fulls, n)}/${of(likens, n)}`)
    .join(",");
}

/** Each phase's median of the paired differences (liken run i minus full run i), in ms. */
function phaseDeltas(fulls: Run[], likens: Run[]): Record<string, number> {
  return Object.fromEntries(
    phaseNames([...fulls, ...likens]).map((n) => [
      n,
      middle(likens.map((l, i) => (l.phases[n] ?? 0) - (fulls[i]!.phases[n] ?? 0))),
    ]),
  );
}

/** When liken decided to download in full (the "nothing" case), as the line says it. */
const decidedField = (r: Run): string =>
  r.decided === undefined ? "" : ` decided-in=${r.decided.toFixed(2)}s`;

/** The medians of alternating full and liken runs. */
function compared(
  fulls: Run[],
  likens: Run[],
): {
  full: Run;
  liken: Run;
  timeRatio: number;
  cpuRatio: number;
  fullRange: [number, number];
} {
  const median = (r: Run[]) => [...r].sort((a, b) => a.s - b.s)[Math.floor(r.length / 2)]!;
  const fullTimes = fulls.map((f) => f.s);
  return {
    full: median(fulls),
    liken: median(likens),
    // Each liken run against the full run just before it: the two share the load of the
    // moment, which moves a run's time on this shared machine by more than liken's own work.
    timeRatio: middle(likens.map((l, i) => l.s / fulls[i]!.s)),
    cpuRatio: middle(likens.map((l, i) => l.cpu / fulls[i]!.cpu)),
    fullRange: [Math.min(...fullTimes), Math.max(...fullTimes)],
  };
}

async function main(): Promise<void> {
  const releases = isRelease(args.old) && isRelease(args.new);
  // The images are files, never Buffers: a slot may be larger than 2 GiB (docs/day-1.md's 4G).
  const images = releases
    ? [
        await slotOf(args.old!, path.join(work, "old-slot.img")),
        await slotOf(args.new!, path.join(work, "new-slot.img")),
      ]
    : args.old !== undefined && args.new !== undefined
      ? [args.old, args.new]
      : await buildSlots(log).then((s) => [s.releases[0].slotImage, s.releases[1].slotImage]);
  const v2 = images[1]!;
  const wanted = (args.cases ?? (releases ? "small" : "small,large,nothing")).split(",");
  const cases = (
    [
      ["small", (out: string) => copySparse(v2, out)],
      ["large", (out: string) => largeChange(v2, out)],
      ["nothing", async (out: string) => randomFile(await sizeOf(v2), out)],
    ] as [string, (out: string) => Promise<unknown>][]
  ).filter(([n]) => wanted.includes(n));
  const channel = path.join(work, "channel");
  // The channel server refuses a directory that does not exist yet.
  mkdirSync(channel, { recursive: true });
  const served: Record<string, Served> = {};
  let counting = "";
  const server = await serveChannel(channel, 0, "127.0.0.1", (rel, bytes) => {
    const s = (served[counting] ??= { bytes: 0, requests: 0, index: 0 });
    if (rel.endsWith("release.yaml")) return;
    s.bytes += bytes;
    s.requests++;
    if (/\.(lkidx|lktop|lkpages)$/.test(rel)) s.index += bytes;
  });
  const desync = await ensureTool("desync", log);
  const oldImg = path.join(work, "v1.img");
  await copySparse(images[0]!, oldImg);
  execFileSync(desync, ["make", path.join(work, "v1.caibx"), oldImg]);
  await buildRelease({
    version: "v1",
    out: channel,
    artifacts: [{ name: "rootfs", file: oldImg }],
  });
  const lines: string[] = [];
  const goals: string[] = [];
  try {
    for (const [name, make] of cases) {
      const file = path.join(work, `${name}.img`);
      await make(file);
      const nextSize = await sizeOf(file);
      const built = await buildRelease({
        version: name,
        out: channel,
        artifacts: [{ name: "rootfs", file }],
      });
      const missing = await missingOf(oldImg, file);
      const limit = missing.filter(Boolean).length * INDEX_CHUNK;
      const run = async (mode: "full" | "liken", i: number): Promise<Run> => {
        const m = path.join(work, `${name}-${mode}-${i}`);
        mkdirSync(m);
        const config = fileSlots(m, { a: { copyOf: oldImg }, b: nextSize + MiB });
        // Slot a runs v1 as liken staged it: its release and chunk index are kept.
        const store = new SlotStore(config);
        mkdirSync(store.dir("a"), { recursive: true });
        await store.writeRelease("a", readFileSync(path.join(channel, "v1", "release.yaml")));
        await store.keepIndex(
          "a",
          "rootfs",
          readFileSync(path.join(channel, "v1", "v1.img.lkidx")),
        );
        // ... and its index pages (the next release fetches only the pages that differ).
        const v1Dir = path.join(channel, "v1");
        await store.keepIndex(
          "a",
          keptTop("rootfs"),
          readFileSync(path.join(v1Dir, "v1.img.lktop")),
        );
        await store.keepIndex(
          "a",
          keptPages("rootfs"),
          readFileSync(path.join(v1Dir, "v1.img.lkpages")),
        );
        counting = `${name}-${mode}-${i}`;
        let decided: number | undefined;
        const phases: Record<string, number> = {};
        const cpu0 = process.cpuUsage();
        const t = performance.now();
        await downloadRelease({
          config,
          source: server.url,
          version: name,
          digest: built.digest,
          adaptive: mode === "liken",
          log: (line) => {
            if (/downloading in full/.test(line)) decided ??= (performance.now() - t) / 1000;
            const done = /^(\w+): done in (\d+) ms$/.exec(line);
            if (done) phases[done[1]!] = Number(done[2]);
          },
        });
        const s = (performance.now() - t) / 1000;
        const cpu = process.cpuUsage(cpu0);
        rmSync(m, { recursive: true, force: true });
        log(
          `delta: ${counting} ${s.toFixed(3)} s cpu ${((cpu.user + cpu.system) / 1e6).toFixed(3)} s ${phaseField(phases)}` +
            (decided !== undefined ? ` decided ${(decided * 1000).toFixed(0)} ms` : ""),
        );
        return {
          s,
          phases,
          cpu: (cpu.user + cpu.system) / 1e6,
          ...(decided !== undefined ? { decided } : {}),
          served: served[counting]!,
        };
      };
      // Alternating runs, medians: the machine's load moves the times, not the bytes.
      const fulls: Run[] = [];
      const likens: Run[] = [];
      for (let i = 0; i < repeat; i++) {
        fulls.push(await run("full", i));
        likens.push(await run("liken", i));
      }
      const { full, liken, timeRatio, cpuRatio, fullRange } = compared(fulls, likens);
      const indexBytes = liken.served.index;
      // desync: a chunk store of the new image under the channel, extracted with v1 as seed.
      const store = path.join(channel, `${name}-store`);
      const caibx = path.join(work, `${name}.caibx`);
      mkdirSync(store, { recursive: true });
      execFileSync(desync, ["make", "-s", store, caibx, file]);
      counting = `${name}-desync`;
      const out = path.join(work, `${name}-desync.img`);
      const t = performance.now();
      // Not execFileSync: the server answering desync runs in this process's event loop.
      await promisify(execFile)(desync, [
        "extract",
        "-s",
        `${server.url}/${name}-store/`,
        "--seed",
        `${path.join(work, "v1.caibx")}:${oldImg}`,
        caibx,
        out,
      ]);
      const desyncS = (performance.now() - t) / 1000;
      const d = served[counting] ?? { bytes: 0, requests: 0, index: 0 };
      d.bytes += readFileSync(caibx).length; // its index travels too
      if ((await digestOfFile(out)) !== (await digestOfFile(file)))
        throw new Error(`desync extracted other bytes for ${name}`);
      rmSync(out);
      rmSync(store, { recursive: true, force: true });
      const mb = (n: number): string => `${(n / MiB).toFixed(1)}M`;
      const ofLimit = limit > 0 ? ((liken.served.bytes - indexBytes) / limit).toFixed(2) : "-";
      // The goal, and where it is not met, the measured reason.
      const misses = goalMisses({
        releases,
        name,
        limit,
        indexBytes,
        missing,
        liken,
        full,
        timeRatio,
        cpuRatio,
        fullRange,
        phaseDelta: phaseDeltas(fulls, likens),
        desync: d,
        desyncIndex: readFileSync(caibx).length,
      });
      const goal = misses.length === 0 ? "met" : `not met: ${misses.join("; ")}`;
      // The last line carries each miss's measured reason, not only its verdict.
      goals.push(`${name}=${misses.length === 0 ? "met" : `not met (${misses.join("; ")})`}`);
      lines.push(
        `delta: case=${name} size=${mb(nextSize)} new-content=${mb(limit)} liken=${mb(liken.served.bytes)} ` +
          `(${ofLimit} of limit, index ${mb(indexBytes)}) desync=${mb(d.bytes)} full=${mb(full.served.bytes)} ` +
          `requests=${liken.served.requests}/${d.requests} time-vs-full=${timeRatio.toFixed(2)} cpu-vs-full=${cpuRatio.toFixed(2)} ` +
          `time: liken=${liken.s.toFixed(2)}s desync=${desyncS.toFixed(2)}s full=${full.s.toFixed(2)}s` +
          `${decidedField(liken)} phases-ms-full/liken=${phaseMedians(fulls, likens)} load=${loadavg()[0]!.toFixed(1)} goal=${goal}`,
      );
      log(lines[lines.length - 1]!);
    }
  } finally {
    await server.close();
    rmSync(work, { recursive: true, force: true });
  }
  // The last line is the monthly-fix case, the one the goal is stated for.
  // Its goal is over every case: met only where each case met its own.
  const all = goals.every((g) => g.endsWith("=met")) ? "met" : "not met";
  process.stdout.write(
    `${[...lines.slice(1), `${lines[0]!} cases: ${goals.join(" ")} goal-all=${all}`].join("\n")}\n`,
  );
}

await main();
