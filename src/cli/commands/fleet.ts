// `liken fleet status`: one row per Cluster over many kubeconfig contexts (docs/fleet.md),
// and the options that `liken rollout pause|resume --contexts` share with it.
import { InvalidArgumentError, type Command } from "commander";
import { loadKubeConfig } from "../../api/index.js";
import { chooseContexts, parseContextList } from "../../fleet/contexts.js";
import { FleetError } from "../../fleet/errors.js";
import { switchFleet, switchReport } from "../../fleet/pause.js";
import { readFleet } from "../../fleet/read.js";
import { OUTPUTS, render, type Output } from "../../fleet/render.js";
import { parseSeconds } from "./operator.js";

/** Each context's deadline by default: a reachable API server answers two lists well within. */
export const DEFAULT_CONTEXT_TIMEOUT = "3s";
const MAX_TIMEOUT_SECONDS = 600;

export function contextTimeout(text: string): number {
  const s = parseSeconds(text);
  if (s <= 0 || s > MAX_TIMEOUT_SECONDS) {
    throw new InvalidArgumentError(
      `--timeout ${text}: give each context from 1ms to ${MAX_TIMEOUT_SECONDS}s to answer (for example 3s)`,
    );
  }
  return s * 1000;
}

function output(text: string): Output {
  if ((OUTPUTS as readonly string[]).includes(text)) return text as Output;
  throw new InvalidArgumentError(`-o ${text}: give one of ${OUTPUTS.join(", ")}`);
}

export interface ContextOptions {
  kubeconfig?: string;
  contexts?: string;
  selector?: string;
  timeout: number;
}

/** The flags every command over many contexts takes. */
export function withContextOptions(cmd: Command, contextsHelp: string): Command {
  return cmd
    .option("--contexts <a,b,c>", contextsHelp)
    .option(
      "-l, --selector <labels>",
      "only Clusters with these labels (kubectl's label selector, e.g. liken.sh/ring=canary)",
    )
    .option(
      "--timeout <duration>",
      `how long each context has to answer (default ${DEFAULT_CONTEXT_TIMEOUT}); all are asked at once`,
      contextTimeout,
      contextTimeout(DEFAULT_CONTEXT_TIMEOUT),
    )
    .option("--kubeconfig <file>", "kubeconfig to use (default: $KUBECONFIG or ~/.kube/config)");
}

/** The kubeconfig and the contexts to visit (every context without --contexts). */
export function contextsOf(o: ContextOptions): {
  kc: ReturnType<typeof loadKubeConfig>;
  contexts: string[];
} {
  const kc = loadKubeConfig(o.kubeconfig);
  const asked = o.contexts === undefined ? undefined : parseContextList(o.contexts);
  return { kc, contexts: chooseContexts(kc, asked) };
}

export function registerFleet(program: Command): void {
  const fleet = program
    .command("fleet")
    .description("many clusters at once, one kubeconfig context each (docs/fleet.md)");
  withContextOptions(
    fleet
      .command("status")
      .description(
        "one row per Cluster over kubeconfig contexts: ring, release, machines on it, what blocks it, conditions; a context that does not answer is a row saying so",
      ),
    "the contexts to read, comma-separated (default: every context of the kubeconfig)",
  )
    .option("-o, --output <format>", `table, json or yaml (default table)`, output, "table")
    .action(async (o: ContextOptions & { output: Output }) => {
      const { kc, contexts } = contextsOf(o);
      const rows = await readFleet(kc, contexts, {
        timeoutMs: o.timeout,
        ...(o.selector === undefined ? {} : { selector: o.selector }),
      });
      process.stdout.write(render(rows, o.output));
    });
}

export interface SwitchFlags extends ContextOptions {
  allContexts?: boolean;
}

/** Whether a pause or resume names many contexts (--contexts or --all-contexts). */
export function isFleetSwitch(o: SwitchFlags): boolean {
  return o.contexts !== undefined || o.allContexts === true;
}

/** `liken rollout pause|resume --contexts ...`: prints each context's outcome; throws when any was not reached. */
export async function switchContexts(
  cluster: string | undefined,
  paused: boolean,
  o: SwitchFlags,
): Promise<void> {
  if (o.contexts !== undefined && o.allContexts === true) {
    throw new FleetError(
      "LIKEN_FLEET_USAGE",
      "give either --contexts a,b,c or --all-contexts, not both",
    );
  }
  const { kc, contexts } = contextsOf(o.allContexts === true ? { ...o, contexts: undefined } : o);
  const outcomes = await switchFleet(kc, contexts, {
    paused,
    timeoutMs: o.timeout,
    ...(cluster === undefined ? {} : { cluster }),
    ...(o.selector === undefined ? {} : { selector: o.selector }),
  });
  process.stdout.write(switchReport(outcomes, paused));
  const missed = outcomes.filter((x) => !x.reached).map((x) => x.context);
  if (missed.length > 0) {
    const verb = paused ? "pause" : "resume";
    throw new FleetError(
      "LIKEN_FLEET_NOT_ALL_REACHED",
      `${missed.length} of ${outcomes.length} contexts were not reached (${missed.join(", ")}); the others are done: ${verb} those again with --contexts ${missed.join(",")}`,
      { context: { missed } },
    );
  }
}

/** A fleet-only flag given without --contexts: refused, so nothing is done to the wrong scope. */
export function refuseStrayFleetFlags(o: SwitchFlags, command: string): void {
  if (isFleetSwitch(o)) return;
  if (o.selector !== undefined || o.timeout !== contextTimeout(DEFAULT_CONTEXT_TIMEOUT)) {
    throw new FleetError(
      "LIKEN_FLEET_USAGE",
      `--selector and --timeout apply over many contexts: add --contexts a,b,c (or --all-contexts), or name one Cluster: liken rollout ${command} CLUSTER`,
    );
  }
}
