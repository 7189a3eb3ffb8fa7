// `npm run tools -- build [name...] | path <name>`: the pinned helm, promtool, prometheus, umoci
// runc and desync.
// Wiring only; the work is in tools.ts.
import { Command } from "commander";
import { ControlPlaneError } from "./errors.js";
import { TOOLS, ensureTool, isTool, type Tool } from "./tools.js";
import { runProgram } from "./run-program.js";

const err = (line: string): void => {
  process.stderr.write(`${line}\n`);
};

function tool(name: string): Tool {
  if (!isTool(name)) {
    throw new ControlPlaneError(
      "LIKEN_CLUSTER_UNKNOWN_TOOL",
      `no tool named "${name}": liken builds ${TOOLS.join(", ")}`,
    );
  }
  return name;
}

const program = new Command("tools")
  .description(`Pinned tools built from the Go module proxy and cached: ${TOOLS.join(", ")}.`)
  .exitOverride();

program
  .command("build")
  .description("build and cache the named tools (all when none is named)")
  .argument("[names...]", TOOLS.join(" | "))
  .action(async (names: string[]) => {
    for (const n of names.length ? names.map(tool) : TOOLS) {
      err(`${n}: ${await ensureTool(n, err)}`);
    }
  });

program
  .command("path")
  .description("print the path of a tool, building it first when needed")
  .argument("<name>", TOOLS.join(" | "))
  .action(async (name: string) => {
    process.stdout.write(`${await ensureTool(tool(name), err)}\n`);
  });

await runProgram(program);
