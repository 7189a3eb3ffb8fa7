// `liken agent ...`: the per-machine commands. The group is created here; each piece adds
// its subcommands to it (agent-slots.ts: download, status, verify; the daemon adds `run`).
import type { Command } from "commander";
import { addAgentSlotCommands } from "./agent-slots.js";

export function registerAgent(program: Command): Command {
  // Subcommands here take --version (a release version); without positional options the
  // program's own -v/--version would swallow it and print liken's version instead.
  program.enablePositionalOptions();
  const agent = program
    .command("agent")
    .description("What runs on each machine: slots, downloads, the daemon");
  addAgentSlotCommands(agent);
  return agent;
}
