// bench:write — liken's write path against what a systems person would run, in the same run.
//
//   npm run bench:write -- [--size 2G] [--dir /tmp] [--repeat 3] [--server busybox|liken]
//
// Serves a random artifact from a loopback HTTP server (busybox httpd by default: sendfile, as
// nginx or a CDN edge would; --server liken uses liken's own Node server, which spends a core
// of this 2-core machine on the sending side) and measures, each --repeat times (medians):
//   liken      download + per-chunk verify + O_DIRECT write + fdatasync (one child process,
//              with the Node flags the agent gives its download child)
//   pipeline   curl -s URL | tee >(openssl dgst -sha256) | dd of=F bs=4M oflag=direct iflag=fullblock
//   disk       dd direct write of the same bytes (from the page cache)
//   diskSync   the same with conv=fdatasync: shown, not in a ratio (liken syncs, dd does not)
//   hash       openssl dgst -sha256 of the same bytes (from the page cache)
//   readback   liken's O_DIRECT read-back + SHA-256 vs dd iflag=direct | openssl dgst -sha256
// The last line: write-path: vs-pipeline=<ratio> vs-limit=<ratio> vs-synced-limit=<ratio>
//   readback-vs-limit=<ratio> rss=<MiB> bound=<what> vs-bound=<ratio> hash-MiBps=<n> disk-synced-MiBps=<n>
//   host-busy=<%> goal=met|not-met(<the measured reason>)
//   vs-pipeline        pipeline time / liken time
//   vs-limit           liken throughput / min(disk, hash) throughput
//   vs-synced-limit    liken throughput / min(diskSync, hash) throughput (liken syncs)
//   readback-vs-limit  (dd iflag=direct | openssl) time / liken read-back time
//   rss                peak RSS (VmHWM) of the liken child, in MiB
//   bound              what bounds liken's time in this run, measured: the busiest of its
//                      threads (receive: the main thread; hash: liken-hash; each runs on one
//                      core), the synced disk, or all the CPU of liken's threads and of the
//                      server spread over the cores (per-thread CPU from /proc schedstat, the
//                      server's from /proc/<pid>/stat with its reaped children)
//   vs-bound           that bound's time / liken's time (1.00: nothing left but the bound)
//   hash-MiBps, disk-synced-MiBps   openssl's SHA-256 on one core and dd with fdatasync, alone
//   host-busy          the host's CPUs' busy share during liken's runs (/proc/stat): near 100 %
//                      other work took what liken's bound leaves, and vs-bound says how much
//   goal               met (vs-synced-limit >= 0.7, issue 43), else not-met(...) with the
//                      measured reason: the largest bound's seconds against liken's, and the
//                      host's busy share
// The log before it has each run's CPU by part and how busy the host was (the machine is
// shared: the bound names what this run's CPU went to, not what an idle machine would do).
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { DOWNLOAD_NODE_FLAGS } from "../src/agent/download.js";
import { bundleModule } from "../src/cli/entry.js";
import { freePort } from "../src/controlplane/ports.js";
import { randomFillSync } from "node:crypto";
import {
  closeSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  truncateSync,
  unlinkSync,
  writeFileSync,
  writeSync,
} from "node:fs";
import { availableParallelism, tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { stringify } from "yaml";
import { readback } from "../src/native/writer.js";
import { hashFile } from "../src/release/build.js";
import { serveChannel } from "../src/release/serve.js";
import { writeArtifact } from "../src/slots/artifact.js";
import type { Artifact } from "../src/verify/release.js";

const MiB = 1024 * 1024;
const CHUNK = 4 * MiB;
const self = fileURLToPath(import.meta.url);
const repo = path.resolve(path.dirname(self), "..");

function parseSize(v: string): number {
  const m = /^(\d+)([KMG]?)(i?B)?$/i.exec(v);
  if (!m) throw new Error(`--size ${v}: use for example 512M or 2G`);
  return Number(m[1]) * { "": 1, K: 1024, M: MiB, G: 1024 * MiB }[m[2]!.toUpperCase() as "K"]!;
}

function hwmMiB(): number {
  const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync("/proc/self/status", "utf8"));
  return m ? Number(m[1]) / 1024 : NaN;
}

/** Child: one liken operation, timed inside the process; prints {seconds, hwm}. */
async function child(op: string, jobFile: string): Promise<void> {
  const job = JSON.parse(readFileSync(jobFile, "utf8")) as {
    url: string;
    artifact: Artifact;
    target: string;
  };
  const t0 = process.hrtime.bigint();
  let waitedMs = 0;
  // The writer's threads end inside finish(): sample every thread's CPU while it runs.
  const cpu = new Map<string, number>();
  const sample = () => threadCpu(cpu);
  const sampler = setInterval(sample, 50);
  if (op === "write") {
    await writeArtifact({
      url: new URL(job.url),
      artifact: job.artifact,
      device: job.target,
      onCheckpoint: async () => {},
      onWritten: (s) => (waitedMs = s.waitedMs),
    });
  } else {
    const got = await readback(job.target, { size: job.artifact.size });
    if (`sha256:${got}` !== job.artifact.digest) throw new Error(`read-back digest ${got} differs`);
  }
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  clearInterval(sampler);
  sample();
  const threads = Object.fromEntries(cpu);
  process.stdout.write(`${JSON.stringify({ seconds, hwm: hwmMiB(), waitedMs, threads })}\n`);
}

/**
 * CPU seconds of each thread of this process so far (schedstat: ns on the CPU), by name: the
 * main thread (receive: the socket, undici, the copy into the writer), liken-hash and
 * liken-write (native/writer.cc names them), the rest by their own names. Keyed by thread id
 * inside `into`, then summed by name by the caller's last sample.
 */
function threadCpu(into: Map<string, number>): void {
  for (const tid of readdirSync("/proc/self/task")) {
    try {
      const ns = Number(readFileSync(`/proc/self/task/${tid}/schedstat`, "utf8").split(" ")[0]);
      const name =
        Number(tid) === process.pid
          ? "main"
          : readFileSync(`/proc/self/task/${tid}/comm`, "utf8").trim();
      into.set(`${name}/${tid}`, ns / 1e9);
    } catch {
      // the thread ended between the listing and the read
    }
  }
}

/** Sums thread samples by name: main, liken-hash, liken-write, other. */
function byRole(
  threads: Record<string, number>,
): Record<"main" | "hash" | "write" | "other", number> {
  const out = { main: 0, hash: 0, write: 0, other: 0 };
  for (const [k, v] of Object.entries(threads)) {
    const name = k.slice(0, k.lastIndexOf("/"));
    const role =
      name === "main"
        ? "main"
        : name === "liken-hash"
          ? "hash"
          : name === "liken-write"
            ? "write"
            : "other";
    out[role] += v;
  }
  return out;
}

/** CPU seconds of a process (with its reaped children): utime, stime, cutime, cstime. */
function processCpu(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // Fields 14-17, in clock ticks (100 a second on Linux).
    return (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) / 100;
  } catch {
    return 0; // gone
  }
}

/**
 * The server's CPU while liken downloads: busybox httpd forks a process per request, which may
 * not be reaped (its CPU not yet in the parent's cutime) when the download ends, so its
 * children are sampled while they run. Returns a stop() that gives the seconds used.
 */
function serverCpu(pid: number): () => number {
  const seen = new Map<number, number>();
  const base = processCpu(pid);
  const tick = () => {
    let kids: number[] = [];
    try {
      kids = readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8")
        .trim()
        .split(/\s+/)
        .filter(Boolean)
        .map(Number);
    } catch {
      // no children file: nothing to add
    }
    for (const k of kids) seen.set(k, Math.max(seen.get(k) ?? 0, processCpu(k)));
  };
  const timer = setInterval(tick, 50);
  return () => {
    clearInterval(timer);
    tick();
    const reaped = processCpu(pid) - base;
    const live = [...seen.values()].reduce((a, b) => a + b, 0);
    // A child reaped before the end is in both: count the larger view of it.
    return Math.max(reaped, live);
  };
}

/** The host's busy share of its CPUs between two readings of /proc/stat's cpu line. */
function hostTicks(): { busy: number; total: number } {
  const f = readFileSync("/proc/stat", "utf8")
    .split("\n")[0]!
    .trim()
    .split(/\s+/)
    .slice(1)
    .map(Number);
  const idle = f[3]! + f[4]!;
  const total = f.reduce((a, b) => a + b, 0);
  return { busy: total - idle, total };
}

async function serve(dir: string): Promise<void> {
  const s = await serveChannel(dir);
  process.stdout.write(`${s.url}\n`);
  process.once("SIGTERM", () => void s.close().then(() => process.exit(0)));
}

function run(cmd: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const p = spawn(cmd, args, { stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    p.stdout.on("data", (d: Buffer) => (out += d.toString()));
    p.on("exit", (code) =>
      code === 0 ? resolve(out) : reject(new Error(`${cmd} ${args.join(" ")}: exit ${code}`)),
    );
  });
}

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t0 = process.hrtime.bigint();
  await fn();
  return Number(process.hrtime.bigint() - t0) / 1e9;
}

function freshTarget(file: string, size: number): void {
  rmSync(file, { force: true });
  writeFileSync(file, "");
  truncateSync(file, size);
}

function makeArtifact(file: string, size: number): void {
  const fd = openSync(file, "w");
  const buf = Buffer.alloc(16 * MiB);
  for (let off = 0; off < size; off += buf.length) {
    randomFillSync(buf);
    writeSync(fd, buf, 0, Math.min(buf.length, size - off));
  }
  closeSync(fd);
}

/** liken's own static server (Node streams: every byte crosses user space). */
async function likenServer(
  tsx: string[],
  channel: string,
): Promise<{ proc: ChildProcess; base: string }> {
  const proc = spawn(process.execPath, [...tsx, "--serve", channel], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  const base = await new Promise<string>((resolve) =>
    proc.stdout!.once("data", (d: Buffer) => resolve(d.toString().trim())),
  );
  return { proc, base };
}

/** busybox httpd: sendfile(2) and Range, the way nginx or a CDN edge serves a static file, so
 * the server's CPU on this 2-core machine is small and both contenders share what is left. */
async function busyboxServer(channel: string): Promise<{ proc: ChildProcess; base: string }> {
  const port = await freePort();
  const proc = spawn("busybox", ["httpd", "-f", "-p", `127.0.0.1:${port}`, "-h", channel], {
    stdio: ["ignore", "inherit", "inherit"],
  });
  const base = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      await run("curl", ["-sf", "-o", "/dev/null", `${base}/1.0/release.yaml`]);
      return { proc, base };
    } catch (e) {
      if (Date.now() > deadline)
        throw new Error(`busybox httpd did not answer on ${base}: ${String(e)}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

const bash = (script: string) => run("bash", ["-c", script]);
const mbps = (size: number, s: number) => `${(size / MiB / s).toFixed(0)} MiB/s`;

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  if (args[0] === "--child") return child(args[1]!, args[2]!);
  if (args[0] === "--serve") return serve(args[1]!);
  const opt = (name: string, dflt: string) => {
    const i = args.indexOf(name);
    return i >= 0 ? args[i + 1]! : dflt;
  };
  const size = parseSize(opt("--size", "2G"));
  const repeat = Number(opt("--repeat", "3"));
  const serverKind = opt("--server", "busybox");
  if (serverKind !== "busybox" && serverKind !== "liken")
    throw new Error(`--server ${serverKind}: use busybox or liken`);
  const dir = mkdtempSync(path.join(opt("--dir", tmpdir()), "liken-bench-"));
  // The children run from one esbuild bundle, as liken runs from compiled JS in production:
  // tsx alone costs ~60 MiB of RSS and seconds of compile that are not liken's. The bundle
  // sits two levels under the repository so the addon is found at build/Release.
  const bundle = path.join(repo, "build", "liken-bench", "write.mjs");
  await bundleModule(self, bundle);
  const tsx = [bundle];
  // The liken children run with the download child's Node flags, as the agent starts it.
  const likenChild = [...DOWNLOAD_NODE_FLAGS, bundle];
  let server: ChildProcess | undefined;
  try {
    const rel = path.join(dir, "channel", "1.0");
    execFileSync("mkdir", ["-p", rel]);
    const art = path.join(rel, "artifact.img");
    process.stderr.write(`bench:write: ${size} bytes in ${dir}\n`);
    makeArtifact(art, size);
    const h = await hashFile(art, CHUNK);
    const artifact: Artifact = {
      name: "artifact",
      path: "artifact.img",
      size,
      digest: h.digest,
      offset: 0,
      chunks: { size: CHUNK, digests: h.chunks },
    };
    writeFileSync(path.join(rel, "release.yaml"), stringify({ artifacts: [artifact] }));

    const channel = path.join(dir, "channel");
    const started =
      serverKind === "busybox" ? await busyboxServer(channel) : await likenServer(tsx, channel);
    server = started.proc;
    const base = started.base;
    process.stderr.write(`bench:write: served by ${serverKind} at ${base}\n`);
    const url = `${base}/1.0/artifact.img`;
    const target = path.join(dir, "target.img");
    const job = path.join(dir, "job.json");
    writeFileSync(job, JSON.stringify({ url, artifact, target }));
    const hex = h.digest.slice(7);

    const samples = {
      liken: [] as number[],
      pipeline: [] as number[],
      disk: [] as number[],
      diskSync: [] as number[],
      hash: [] as number[],
      rb: [] as number[],
      rbBase: [] as number[],
    };
    let rss = 0;
    const rssOf = { write: 0, readback: 0 };
    const parts = { main: [] as number[], hash: [] as number[], write: [] as number[] };
    const others = { other: [] as number[], server: [] as number[], host: [] as number[] };
    for (let r = 0; r < repeat; r++) {
      freshTarget(target, size);
      const stopServer = serverCpu(server.pid!);
      const h0 = hostTicks();
      const w = JSON.parse(
        await run(process.execPath, [...likenChild, "--child", "write", job]),
      ) as {
        seconds: number;
        hwm: number;
        waitedMs: number;
        threads: Record<string, number>;
      };
      const h1 = hostTicks();
      const serverS = stopServer();
      const t = byRole(w.threads);
      for (const k of ["main", "hash", "write"] as const) parts[k].push(t[k]);
      others.other.push(t.other);
      others.server.push(serverS);
      others.host.push((h1.busy - h0.busy) / (h1.total - h0.total));
      process.stdout.write(
        `liken write ${w.seconds.toFixed(2)} s, of which ${(w.waitedMs / 1000).toFixed(2)} s waiting for a free buffer (disk/hash); ` +
          `CPU s: receive (main thread) ${t.main.toFixed(2)}, hash ${t.hash.toFixed(2)}, write ${t.write.toFixed(2)}, ` +
          `other threads ${t.other.toFixed(2)}, server ${serverS.toFixed(2)}; host busy ${(others.host.at(-1)! * 100).toFixed(0)} %\n`,
      );
      samples.liken.push(w.seconds);
      rss = Math.max(rss, w.hwm);
      rssOf.write = Math.max(rssOf.write, w.hwm);
      const rb = JSON.parse(
        await run(process.execPath, [...likenChild, "--child", "readback", job]),
      ) as {
        seconds: number;
        hwm: number;
      };
      samples.rb.push(rb.seconds);
      rss = Math.max(rss, rb.hwm);
      rssOf.readback = Math.max(rssOf.readback, rb.hwm);
      samples.rbBase.push(
        await timed(async () => {
          const out = await bash(
            `dd if=${target} bs=4M iflag=direct status=none | openssl dgst -sha256`,
          );
          if (!out.includes(hex)) throw new Error(`dd | openssl read back ${out}`);
        }),
      );

      freshTarget(target, size);
      const dgst = path.join(dir, "pipeline.sha256");
      rmSync(dgst, { force: true });
      samples.pipeline.push(
        await timed(() =>
          bash(
            `curl -s ${url} | tee >(openssl dgst -sha256 > ${dgst}) | dd of=${target} bs=4M oflag=direct iflag=fullblock conv=notrunc status=none; ` +
              `while ! grep -q ${hex} ${dgst} 2>/dev/null; do sleep 0.01; done`,
          ),
        ),
      );

      freshTarget(target, size);
      samples.disk.push(
        await timed(() =>
          bash(`dd if=${art} of=${target} bs=4M oflag=direct conv=notrunc status=none`),
        ),
      );
      // Not a limit in the ratio (the issue names dd without a sync), but liken syncs before
      // it reports success and at each resume point: this row shows what the flush costs.
      freshTarget(target, size);
      samples.diskSync.push(
        await timed(() =>
          bash(`dd if=${art} of=${target} bs=4M oflag=direct conv=notrunc,fdatasync status=none`),
        ),
      );
      samples.hash.push(await timed(() => bash(`openssl dgst -sha256 ${art} > /dev/null`)));
    }
    unlinkSync(target);
    const best = Object.fromEntries(
      Object.entries(samples).map(([k, v]) => [k, median(v)]),
    ) as Record<keyof typeof samples, number>;
    const limit = Math.max(best.disk, best.hash);
    for (const [k, v] of Object.entries(best))
      process.stdout.write(
        `${k.padEnd(9)} ${v.toFixed(2)} s  ${mbps(size, v)} (median of ${repeat})\n`,
      );
    process.stdout.write(
      `peak RSS  write ${rssOf.write.toFixed(0)} MiB, read-back ${rssOf.readback.toFixed(0)} MiB\n`,
    );
    // What bounds liken's time, from what was measured in this run: no schedule can be
    // shorter than its busiest thread (the receive and the hash each run on one thread), than
    // the synced disk, or than all the CPU it needs (liken's threads and the server's) spread
    // over the cores. The largest of these is the bound; vs-bound is how close liken comes.
    const m = (xs: number[]) => median(xs);
    const cores = availableParallelism();
    const cpuAll =
      m(parts.main) + m(parts.hash) + m(parts.write) + m(others.other) + m(others.server);
    const bounds = {
      "receive-thread": m(parts.main),
      "hash-thread": m(parts.hash),
      "disk-synced": best.diskSync,
      [`cpu-${cores}-cores`]: cpuAll / cores,
    };
    const [boundName, boundS] = Object.entries(bounds).sort((a, b) => b[1] - a[1])[0]!;
    const syncedLimit = Math.max(best.diskSync, best.hash);
    process.stdout.write(
      `bounds (s): ${Object.entries(bounds)
        .map(([k, v]) => `${k} ${v.toFixed(2)}`)
        .join(
          ", ",
        )}; liken ${best.liken.toFixed(2)}; host busy ${(m(others.host) * 100).toFixed(0)} % during liken's runs\n`,
    );
    process.stdout.write(
      `write-path: vs-pipeline=${(best.pipeline / best.liken).toFixed(2)} vs-limit=${(limit / best.liken).toFixed(2)} ` +
        `vs-synced-limit=${(syncedLimit / best.liken).toFixed(2)} readback-vs-limit=${(best.rbBase / best.rb).toFixed(2)} rss=${rss.toFixed(0)} ` +
        `bound=${boundName} vs-bound=${(boundS / best.liken).toFixed(2)} hash-MiBps=${(size / MiB / best.hash).toFixed(0)} ` +
        `disk-synced-MiBps=${(size / MiB / best.diskSync).toFixed(0)} host-busy=${(m(others.host) * 100).toFixed(0)}% ` +
        `goal=${writeGoal(syncedLimit / best.liken, boundName, boundS, best.liken, m(others.host))}\n`,
    );
  } finally {
    server?.kill("SIGTERM");
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * The goal (issue 43): at least 0.7 of the synced limit; where not, the measured reason: the
 * largest bound this run measured against liken's time, and how busy the host's CPUs were
 * (what the bound does not explain went to waiting for them, or to nothing measured).
 */
function writeGoal(
  ofLimit: number,
  bound: string,
  boundS: number,
  likenS: number,
  hostBusy: number,
): string {
  if (ofLimit >= 0.7) return "met";
  return (
    `not-met(${ofLimit.toFixed(2)} of the synced limit < 0.7: the largest measured bound, ${bound}, ` +
    `is ${boundS.toFixed(2)} s of liken's ${likenS.toFixed(2)} s, ${(likenS - boundS).toFixed(2)} s unexplained by it; ` +
    `the host's CPUs were ${(hostBusy * 100).toFixed(0)} % busy during liken's runs)`
  );
}

await main();
