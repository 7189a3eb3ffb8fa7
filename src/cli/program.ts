// The `liken` program around a set of commands: version, help on errors, and how a failure is
// printed and turned into an exit code. Shared by the full CLI (main.ts) and the agent's lean
// entry (agent-main.ts).
import { Command, CommanderError } from "commander";
import { readFileSync } from "node:fs";
import { LikenError } from "../errors.js";

export async function runCli(register: (program: Command) => void): Promise<void> {
  const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as {
    version: string;
  };
  const program = new Command("liken")
    .description(
      "Move a fleet of Kubernetes machines to a new OS release: A/B slots, a digest chain, reboot turns.",
    )
    .version(pkg.version, "-v, --version")
    .showHelpAfterError()
    .exitOverride();
  register(program);
  try {
    await program.parseAsync(process.argv);
  } catch (e) {
    if (e instanceof CommanderError) {
      process.exitCode = e.exitCode;
    } else if (e instanceof LikenError) {
      process.stderr.write(`liken: ${e.message} [${e.code}]\n`);
      process.exitCode = 1;
    } else {
      process.stderr.write(`liken: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
      process.exitCode = 1;
    }
  }
}
