// bench:write — liken's write path against what a systems person would run, in the same run.
//
//   npm run bench:write -- [--size 2G] [--dir /tmp] [--repeat 1]
//
// Serves a random artifact from a loopback HTTP server (liken's own static server, in its own
// process) and measures:
//   liken      download + per-chunk verify + O_DIRECT write + fdatasync (one child process)
//   pipeline   curl -s URL | tee >(openssl dgst -sha256) | dd of=F bs=4M oflag=direct iflag=fullblock
//   disk       dd direct write of the same bytes (from the page cache)
//   hash       openssl dgst -sha256 of the same bytes (from the page cache)
//   readback   liken's O_DIRECT read-back + SHA-256 vs dd iflag=direct | openssl dgst -sha256
// The last line: write-path: vs-pipeline=<ratio> vs-limit=<ratio> readback-vs-limit=<ratio> rss=<MiB>
//   vs-pipeline        pipeline time / liken time
//   vs-limit           liken throughput / min(disk, hash) throughput
//   readback-vs-limit  (dd iflag=direct | openssl) time / liken read-back time
//   rss                peak RSS (VmHWM) of the liken child, in MiB
import { execFileSync, spawn } from "node:child_process";
import { randomFillSync } from "node:crypto";
import {
  closeSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  truncateSync,
  unlinkSync,
  writeFileSync,
  writeSync,
} from "node:fs";
import { tmpdir } from "node:os";
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
  process.stdout.write(`${JSON.stringify({ seconds, hwm: hwmMiB(), waitedMs })}\n`);
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
  const repeat = Number(opt("--repeat", "1"));
  const dir = mkdtempSync(path.join(opt("--dir", tmpdir()), "liken-bench-"));
  // The children run from one esbuild bundle, as liken runs from compiled JS in production:
  // tsx alone costs ~60 MiB of RSS and seconds of compile that are not liken's. The bundle
  // sits two levels under the repository so the addon is found at build/Release.
  const bundle = path.join(repo, "build", "liken-bench", "write.mjs");
  const { build } = await import("esbuild");
  await build({
    entryPoints: [self],
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    packages: "external",
    outfile: bundle,
    logLevel: "error",
  });
  const tsx = [bundle];
  let server: ReturnType<typeof spawn> | undefined;
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

    server = spawn(process.execPath, [...tsx, "--serve", path.join(dir, "channel")], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    const base = await new Promise<string>((resolve) =>
      server!.stdout!.once("data", (d: Buffer) => resolve(d.toString().trim())),
    );
    const url = `${base}/1.0/artifact.img`;
    const target = path.join(dir, "target.img");
    const job = path.join(dir, "job.json");
    writeFileSync(job, JSON.stringify({ url, artifact, target }));
    const hex = h.digest.slice(7);

    const best = {
      liken: Infinity,
      pipeline: Infinity,
      disk: Infinity,
      hash: Infinity,
      rb: Infinity,
      rbBase: Infinity,
    };
    let rss = 0;
    const rssOf = { write: 0, readback: 0 };
    for (let r = 0; r < repeat; r++) {
      freshTarget(target, size);
      const w = JSON.parse(await run(process.execPath, [...tsx, "--child", "write", job])) as {
        seconds: number;
        hwm: number;
        waitedMs: number;
      };
      process.stdout.write(
        `liken write ${w.seconds.toFixed(2)} s, of which ${(w.waitedMs / 1000).toFixed(2)} s waiting for a free buffer (disk/hash)\n`,
      );
      best.liken = Math.min(best.liken, w.seconds);
      rss = Math.max(rss, w.hwm);
      rssOf.write = Math.max(rssOf.write, w.hwm);
      const rb = JSON.parse(await run(process.execPath, [...tsx, "--child", "readback", job])) as {
        seconds: number;
        hwm: number;
      };
      best.rb = Math.min(best.rb, rb.seconds);
      rss = Math.max(rss, rb.hwm);
      rssOf.readback = Math.max(rssOf.readback, rb.hwm);
      best.rbBase = Math.min(
        best.rbBase,
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
      best.pipeline = Math.min(
        best.pipeline,
        await timed(() =>
          bash(
            `curl -s ${url} | tee >(openssl dgst -sha256 > ${dgst}) | dd of=${target} bs=4M oflag=direct iflag=fullblock conv=notrunc status=none; ` +
              `while ! grep -q ${hex} ${dgst} 2>/dev/null; do sleep 0.01; done`,
          ),
        ),
      );

      freshTarget(target, size);
      best.disk = Math.min(
        best.disk,
        await timed(() =>
          bash(`dd if=${art} of=${target} bs=4M oflag=direct conv=notrunc status=none`),
        ),
      );
      best.hash = Math.min(
        best.hash,
        await timed(() => bash(`openssl dgst -sha256 ${art} > /dev/null`)),
      );
    }
    unlinkSync(target);
    const limit = Math.max(best.disk, best.hash);
    for (const [k, v] of Object.entries(best))
      process.stdout.write(`${k.padEnd(9)} ${v.toFixed(2)} s  ${mbps(size, v)}\n`);
    process.stdout.write(
      `peak RSS  write ${rssOf.write.toFixed(0)} MiB, read-back ${rssOf.readback.toFixed(0)} MiB\n`,
    );
    process.stdout.write(
      `write-path: vs-pipeline=${(best.pipeline / best.liken).toFixed(2)} vs-limit=${(limit / best.liken).toFixed(2)} ` +
        `readback-vs-limit=${(best.rbBase / best.rb).toFixed(2)} rss=${rss.toFixed(0)}\n`,
    );
  } finally {
    server?.kill("SIGTERM");
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
