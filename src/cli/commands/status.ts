// `liken status [CLUSTER]`: a live view of a rollout. In a terminal it refreshes in place;
// in a pipe it prints once (or, with --watch, a new block on every change).
import type { Command } from "commander";
import logUpdate from "log-update";
import { setTimeout as sleep } from "node:timers/promises";
import { LikenApi } from "../../api/client.js";
import type { Cluster } from "../../api/types.js";
import { LikenError } from "../../errors.js";
import { renderStatus } from "../views/status.js";
import { recordTimeline } from "./timeline.js";

/** Refresh period of the live view: fast enough to watch a download, cheap for the API. */
const REFRESH_MS = 1000;

async function snapshot(api: LikenApi, name: string | undefined): Promise<string[]> {
  const [clusters, machines] = await Promise.all([api.clusters.list(), api.machines.list()]);
  const chosen: Cluster[] = name
    ? clusters.items.filter((c) => c.metadata.name === name)
    : clusters.items;
  if (name && chosen.length === 0) {
    throw new LikenError(
      "LIKEN_CLI_NO_CLUSTER",
      `no Cluster named ${name}; list them with: kubectl get clusters`,
    );
  }
  if (chosen.length === 0) return ["no Cluster yet; create one (see README) or run: npm run lab"];
  const now = new Date();
  return chosen.flatMap((c, i) => [
    ...(i ? [""] : []),
    ...renderStatus(c, machines.items, { now }),
  ]);
}

export function registerStatus(program: Command): void {
  program
    .command("status")
    .description(
      "a live view of the rollout: each machine's step, downloads, turns and what blocks",
    )
    .argument("[cluster]", "the Cluster (default: all)")
    .option("--kubeconfig <file>", "kubeconfig (default: KUBECONFIG or ~/.kube/config)")
    .option("-w, --watch", "keep refreshing (the default in a terminal)")
    .option("--once", "print once and exit (the default in a pipe)")
    .option(
      "--timeline <file>",
      "record the rollout of CLUSTER and draw it into an SVG file when it settles (or on Ctrl-C)",
    )
    .action(
      async (
        cluster: string | undefined,
        o: { kubeconfig?: string; watch?: boolean; once?: boolean; timeline?: string },
      ) => {
        const api = LikenApi.fromKubeconfig(o.kubeconfig);
        if (o.timeline !== undefined) {
          if (cluster === undefined) {
            throw new LikenError(
              "LIKEN_CLI_TIMELINE_NEEDS_CLUSTER",
              "--timeline draws one Cluster's rollout: name it (liken status CLUSTER --timeline FILE)",
            );
          }
          await recordTimeline(api, cluster, o.timeline, (l) => process.stderr.write(`${l}\n`));
          return;
        }
        const tty = process.stdout.isTTY === true;
        const live = !o.once && (o.watch === true || tty);
        if (!live) {
          process.stdout.write(`${(await snapshot(api, cluster)).join("\n")}\n`);
          return;
        }
        let last = "";
        for (;;) {
          let text: string;
          try {
            text = (await snapshot(api, cluster)).join("\n");
          } catch (e) {
            if (e instanceof LikenError && e.code === "LIKEN_CLI_NO_CLUSTER") throw e;
            text = `${last}\n(API unreachable: ${(e as Error).message}; retrying)`;
          }
          if (tty) logUpdate(text);
          else if (text !== last) process.stdout.write(`${text}\n\n`);
          last = text;
          await sleep(REFRESH_MS);
        }
      },
    );
}
