// bench:fleet-download: the channel's bytes and the time until every machine has staged, with
// peers off and on, same release, same channel rate, same run (docs/peers.md).
//
//   npm run bench:fleet-download -- [--machines 30] [--size 8MiB] [--rate 50MB]
//
// Each machine is liken's download (src/slots/stage.ts) with two file-backed slots, in this one
// process (not `liken agent run`: 30 agents and their download children do not fit 2 cores
// beside the control plane); its slot a holds nothing of the release. The channel is a static
// server whose bodies share one token bucket at --rate (a WAN uplink). Peers on: the operator's
// decider (src/operator/peers/assign.ts) assigns sources each time a download ends; a machine
// that staged starts liken's peer server (rate 50 MiB/s) and becomes a holder.
// Last line:
//   fleet-download: machines=30 channel-bytes-vs-one-copy=… stage-all-on-vs-off=… off-copies=…
// Goal: channel-bytes-vs-one-copy <= 1.1 and stage-all-on-vs-off <= 0.3.
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { availableParallelism, tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { parseSize } from "../src/cli/commands/size.js";
import { assignSources, type Holder } from "../src/operator/peers/assign.js";
import { buildRelease } from "../src/release/build.js";
import type { AgentSlotsConfig } from "../src/slots/config.js";
import {
  ByteBucket,
  resolveFromStore,
  startPeerServer,
  type PeerServer,
} from "../src/slots/peer-serve.js";
import { downloadRelease } from "../src/slots/stage.js";
import { fileSlots } from "../test/support/file-slots.js";
import { SlotStore } from "../src/slots/store.js";

const { values: args } = parseArgs({
  options: {
    machines: { type: "string", default: "30" },
    size: { type: "string", default: "8MiB" },
    rate: { type: "string", default: "50000000" },
  },
});
const N = Number(args.machines);
const SIZE = parseSize(args.size!);
const RATE = Number(args.rate);
/** Seeds on the channel at once, and peers per machine (the main one and two spares). */
const CHANNEL_MACHINES = 1;
const PEERS_PER_MACHINE = 3;
/** The tree's fan-out: each holder serves this many machines at once (docs/adr/peers-tree.md). */
const PER_HOLDER = 4;
const work = mkdtempSync(path.join(tmpdir(), "liken-bench-fleet-"));
const log = (s: string): void => void process.stderr.write(`${s}\n`);

/** A static channel whose bodies all pass one token bucket: the uplink at `rate` bytes/s. */
async function rateLimitedChannel(dir: string, rate: number) {
  const bucket = new ByteBucket(rate);
  let sent = 0;
  const server: Server = createServer((req, res) => {
    void (async () => {
      const file = path.join(dir, decodeURIComponent(new URL(req.url!, "http://x").pathname));
      let data: Buffer;
      try {
        data = readFileSync(file);
      } catch {
        res.writeHead(404).end();
        return;
      }
      const m = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? "");
      const from = m ? Number(m[1]) : 0;
      const to = m && m[2] !== "" ? Math.min(Number(m[2]), data.length - 1) : data.length - 1;
      res.writeHead(m ? 206 : 200, {
        "content-length": String(to - from + 1),
        ...(m ? { "content-range": `bytes ${from}-${to}/${data.length}` } : {}),
      });
      for (let at = from; at <= to; at += 64 * 1024) {
        const piece = data.subarray(at, Math.min(at + 64 * 1024, to + 1));
        await bucket.take(piece.length);
        sent += piece.length;
        if (!res.write(piece)) await new Promise((r) => res.once("drain", r));
      }
      res.end();
    })();
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    sent: () => sent,
    reset: () => void (sent = 0),
    close: () => new Promise<void>((r) => (server.closeAllConnections(), server.close(() => r()))),
  };
}

function machine(round: string, i: number): { name: string; config: AgentSlotsConfig } {
  const name = `m${String(i).padStart(2, "0")}`;
  const dir = path.join(work, round, name);
  mkdirSync(dir, { recursive: true });
  return { name, config: fileSlots(dir, { a: SIZE + 1024 * 1024, b: SIZE + 1024 * 1024 }) };
}

async function main(): Promise<void> {
  const file = path.join(work, "rootfs.img");
  writeFileSync(file, randomBytes(SIZE));
  const channelDir = path.join(work, "channel");
  const { digest } = await buildRelease({
    version: "1.0",
    out: channelDir,
    chunkSize: 1024 * 1024,
    artifacts: [{ name: "rootfs", file }],
  });
  const oneCopy =
    statSync(path.join(channelDir, "1.0", "release.yaml")).size +
    statSync(path.join(channelDir, "1.0", "rootfs.img")).size +
    statSync(path.join(channelDir, "1.0", "rootfs.img.lkidx")).size;
  const channel = await rateLimitedChannel(channelDir, RATE);
  const zone = (i: number) => `zone-${i % 3}`;
  const req = (config: AgentSlotsConfig, peers: string[] = []) => ({
    config,
    source: channel.url,
    version: "1.0",
    digest,
    direct: false,
    ...(peers.length
      ? { peers, onPeerDropped: (d: unknown) => log(`peer dropped: ${JSON.stringify(d)}`) }
      : {}),
  });

  // Peers off: every machine from the channel at once.
  const off = Array.from({ length: N }, (_, i) => machine("off", i));
  let t0 = Date.now();
  await Promise.all(off.map((m) => downloadRelease(req(m.config))));
  const offMs = Date.now() - t0;
  const offBytes = channel.sent();
  log(
    `peers off: ${N} staged in ${offMs} ms, channel sent ${offBytes} bytes (${(offBytes / oneCopy).toFixed(1)} copies)`,
  );

  // Peers on: the decider assigns; a staged machine serves.
  channel.reset();
  const on = Array.from({ length: N }, (_, i) => ({ ...machine("on", i), zone: zone(i) }));
  const servers: PeerServer[] = [];
  const holders: Holder[] = [];
  const started = new Set<string>();
  const load: Record<string, number> = {};
  const cpu0 = process.cpuUsage();
  t0 = Date.now();
  await new Promise<void>((done, fail) => {
    let staged = 0;
    const schedule = (): void => {
      const downloaders = on
        .filter((m) => !started.has(m.name))
        .map((m) => ({ machine: m.name, zone: m.zone }));
      const busyOnChannel = on.filter(
        (m) => started.has(m.name) && !holders.some((h) => h.machine === m.name),
      ).length;
      for (const a of assignSources({
        downloaders,
        holders,
        channelMachines:
          holders.length === 0 ? Math.max(0, CHANNEL_MACHINES - busyOnChannel) : CHANNEL_MACHINES,
        peersPerMachine: PEERS_PER_MACHINE,
        perHolder: PER_HOLDER,
        load,
      })) {
        if (a.source === "wait") continue;
        const m = on.find((x) => x.name === a.machine)!;
        started.add(m.name);
        const main = a.source === "peers" ? a.peers[0]! : undefined;
        if (main) load[main] = (load[main] ?? 0) + 1;
        downloadRelease(req(m.config, a.source === "peers" ? a.peers : []))
          .then(async () => {
            if (main) load[main]! -= 1;
            const store = new SlotStore(m.config);
            const s = await startPeerServer({
              resolve: resolveFromStore(store, "a", (d) => d === digest),
              rate: 50 * 1024 * 1024,
              port: 0,
              host: "127.0.0.1",
            });
            servers.push(s);
            holders.push({ machine: m.name, zone: m.zone, url: s.url });
            if (++staged === N) done();
            else schedule();
          })
          .catch(fail);
      }
    };
    schedule();
  });
  const onMs = Date.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  /** CPU this process used while peers were on, as a share of one core over that time. */
  const cpuShare = (cpu.user + cpu.system) / 1000 / onMs;
  const onBytes = channel.sent();
  const busiest = Math.max(...servers.map((s) => s.served()));
  log(
    `peers on: ${N} staged in ${onMs} ms, channel sent ${onBytes} bytes, busiest peer uploaded ${busiest} bytes`,
  );
  for (const s of servers) await s.close();
  await channel.close();
  rmSync(work, { recursive: true, force: true });
  const vsOne = onBytes / oneCopy;
  const ratio = onMs / offMs;
  const why =
    vsOne <= 1.1 && ratio <= 0.3
      ? ""
      : ` (goal missed: ${vsOne > 1.1 ? `the ${CHANNEL_MACHINES} seeds each fetch one copy from the channel` : ""}${vsOne > 1.1 && ratio > 0.3 ? "; " : ""}${ratio > 0.3 ? `staging from peers is bound by this host's CPU: the ${N} machines share one process, which used ${(cpuShare * 100).toFixed(0)} % of a core (${availableParallelism()} cores) for ${onMs} ms hashing and writing, while off is bound by the channel's ${(RATE / 1e6).toFixed(0)} MB/s` : ""})`;
  process.stdout.write(
    `fleet-download: machines=${N} channel-bytes-vs-one-copy=${vsOne.toFixed(2)} stage-all-on-vs-off=${ratio.toFixed(2)} off-copies=${(offBytes / oneCopy).toFixed(1)}${why}\n`,
  );
}

main().catch((e: unknown) => {
  rmSync(work, { recursive: true, force: true });
  log((e as Error).stack ?? String(e));
  process.exit(1);
});
