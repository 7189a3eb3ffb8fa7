// `liken agent download|status|verify`: one-shot slot commands for people and tests.
// `download` is also the agent's download child: each action loads what it runs when it runs
// (HTTP, the writer and the release check for a download), so the child loads nothing else.
import { InvalidArgumentError, type Command } from "commander";
import type { SlotStatus } from "../../slots/check.js";
import { DEFAULT_CONFIG, loadAgentConfig } from "../../slots/config.js";
import { SlotError } from "../../slots/errors.js";
import { checkPeerRate } from "../../slots/peer-rate.js";
import { DIGEST_RE } from "../../verify/digest.js";
import { parseMillis, parsePort } from "./numbers.js";
import { parseSize } from "./size.js";
import { parseSource } from "./urls.js";

/** `--peer <url>`, repeatable: a peer's base URL (docs/peers.md), http or https only. */
function collectPeer(v: string, prev: string[]): string[] {
  let u: URL;
  try {
    u = new URL(v);
  } catch {
    throw new InvalidArgumentError(`"${v}" is not a URL (for example http://10.0.0.7:7450/)`);
  }
  if (u.protocol !== "http:" && u.protocol !== "https:")
    throw new InvalidArgumentError(`"${v}": a peer is served over http or https`);
  return [...prev, u.href];
}

/** `serve-peers --rate <size>`: a size the peer server can pace (at least 64 KiB a second). */
function parsePeerRate(v: string): number {
  const rate = parseSize(v);
  const low = checkPeerRate(rate, `--rate ${v} (${rate} bytes/s)`);
  if (low !== undefined) throw new InvalidArgumentError(`${low.code}: ${low.message}`);
  return rate;
}

function statusTable(rows: SlotStatus[]): string {
  const head = ["SLOT", "RUNNING", "STATE", "VERSION", "VERIFIED", "DEVICE"];
  const body = rows.map((r) => [
    r.slot,
    r.running ? "yes" : "",
    r.state === "writing" && r.writtenBytes !== undefined
      ? `writing (${r.writtenBytes} bytes)`
      : r.state,
    r.version ?? "",
    r.state === "staged" ? (r.verifiedAt ?? "") : "",
    r.device,
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((b) => b[i]!.length)));
  return (
    [head, ...body]
      .map((r) =>
        r
          .map((c, i) => c.padEnd(widths[i]!))
          .join("  ")
          .trimEnd(),
      )
      .join("\n") + "\n"
  );
}

/** Adds download, status and verify to the `agent` command group. */
export function addAgentSlotCommands(agent: Command): void {
  agent
    .command("download")
    .description("Download a release into the slot not running, verify it, and stage it")
    .option("--config <file>", "agent config", DEFAULT_CONFIG)
    .requiredOption(
      "--source <url>",
      "the release channel, for example https://releases.liken.sh",
      parseSource,
    )
    .requiredOption("--version <version>", "the release version")
    .requiredOption("--digest <sha256:hex>", "the catalog digest of the release's release.yaml")
    .option("--running <slot>", "the slot that runs (overrides the config and /proc/cmdline)")
    .option("--idle-timeout <ms>", "give up on a server silent this long", parseMillis, 30_000)
    .option(
      "--checkpoint-every <size>",
      "bytes between durable resume points",
      parseSize,
      64 * 1024 * 1024,
    )
    .option(
      "--no-adaptive",
      "download every artifact whole, ignoring the releases' chunk indexes (docs/releases.md)",
    )
    .option(
      "--peer <url>",
      "a peer serving the release (repeatable; tried in order before the channel, docs/peers.md)",
      collectPeer,
      [] as string[],
    )
    .action(
      async (o: {
        config: string;
        source: string;
        version: string;
        digest: string;
        running?: string;
        idleTimeout: number;
        checkpointEvery: number;
        adaptive: boolean;
        peer: string[];
      }) => {
        if (!DIGEST_RE.test(o.digest)) {
          throw new SlotError(
            "LIKEN_SLOT_CONFIG_INVALID",
            `--digest ${o.digest}: must be sha256: and 64 lowercase hex digits`,
          );
        }
        const { downloadRelease } = await import("../../slots/stage.js");
        const r = await downloadRelease({
          config: await loadAgentConfig(o.config),
          source: o.source,
          version: o.version,
          digest: o.digest,
          ...(o.running ? { running: o.running } : {}),
          fetch: { idleTimeoutMs: o.idleTimeout },
          checkpointEvery: o.checkpointEvery,
          adaptive: o.adaptive,
          log: (m) => process.stderr.write(`liken: ${m}\n`),
          ...(o.peer.length > 0
            ? {
                peers: o.peer,
                // One JSON line per dropped peer, for whoever runs the child to report.
                onPeerDropped: (d) =>
                  process.stderr.write(`liken: peer-dropped ${JSON.stringify(d)}\n`),
              }
            : {}),
        });
        process.stdout.write(
          r.outcome === "staged"
            ? `slot ${r.slot}: staged ${r.version} (${r.digest}), every artifact verified\n`
            : `slot ${r.slot}: ${r.version} was already staged and verified\n`,
        );
      },
    );

  agent
    .command("serve-peers")
    .description("Serve the releases this machine holds verified to its peers (docs/peers.md)")
    .option("--config <file>", "agent config", DEFAULT_CONFIG)
    .option("--running <slot>", "the slot that runs (overrides the config and /proc/cmdline)")
    .option("--port <port>", "the port to serve on (0: any)", parsePort, 7450)
    .option("--host <host>", "the address to listen on", "0.0.0.0")
    .option(
      "--rate <size>",
      "bytes a second for everything served (e.g. 50MiB; at least 64KiB)",
      parsePeerRate,
      50 * 1024 ** 2,
    )
    .requiredOption(
      "--release <sha256:hex>",
      "a release digest the Cluster trusts (repeatable): only those are served",
      (v: string, prev: string[]) => {
        if (!DIGEST_RE.test(v))
          throw new InvalidArgumentError(`${v}: must be sha256: and 64 lowercase hex digits`);
        return [...prev, v];
      },
      [] as string[],
    )
    .action(
      async (o: {
        config: string;
        running?: string;
        port: number;
        host: string;
        rate: number;
        release: string[];
      }) => {
        const { runningSlot } = await import("../../slots/config.js");
        const { SlotStore } = await import("../../slots/store.js");
        const { resolveFromStore, startPeerServer } = await import("../../slots/peer-serve.js");
        const config = await loadAgentConfig(o.config);
        const store = new SlotStore(config);
        const trusted = new Set(o.release);
        const server = await startPeerServer({
          resolve: resolveFromStore(store, await runningSlot(config, o.running), (d) =>
            trusted.has(d),
          ),
          rate: o.rate,
          port: o.port,
          host: o.host,
        });
        process.stdout.write(`serving peers at ${server.url}\n`);
        await new Promise<void>((r) => {
          process.once("SIGTERM", r);
          process.once("SIGINT", r);
        });
        await server.close();
      },
    );

  agent
    .command("status")
    .description("Show both slots: what each holds and whether it verified")
    .option("--config <file>", "agent config", DEFAULT_CONFIG)
    .option("--running <slot>", "the slot that runs (overrides the config and /proc/cmdline)")
    .option("-o, --output <format>", "table or json", "table")
    .action(async (o: { config: string; running?: string; output: string }) => {
      const { slotStatus } = await import("../../slots/check.js");
      const rows = await slotStatus(await loadAgentConfig(o.config), o.running);
      process.stdout.write(
        o.output === "json" ? `${JSON.stringify(rows, null, 2)}\n` : statusTable(rows),
      );
    });

  agent
    .command("verify")
    .description(
      "Re-read the staged slot from the medium and check it against its release; withdraw it if it fails",
    )
    .option("--config <file>", "agent config", DEFAULT_CONFIG)
    .option("--running <slot>", "the slot that runs (overrides the config and /proc/cmdline)")
    .action(async (o: { config: string; running?: string }) => {
      const { verifyStagedSlot } = await import("../../slots/check.js");
      const r = await verifyStagedSlot(
        await loadAgentConfig(o.config),
        o.running ? { running: o.running } : {},
      );
      if (!r.ok) {
        throw new SlotError(
          "LIKEN_SLOT_VERIFY_FAILED",
          `slot ${r.slot} (${r.version}) failed verification: ${r.problems.join("; ")}; the slot is withdrawn`,
        );
      }
      process.stdout.write(`slot ${r.slot}: ${r.version} verified\n`);
    });
}
