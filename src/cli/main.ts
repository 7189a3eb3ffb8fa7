// The `liken` command: wiring only. Each command group lives in src/cli/commands/ and
// registers itself on the program; this file adds them and runs.
import { Command, CommanderError } from "commander";
import { readFileSync } from "node:fs";
import { LikenError } from "../errors.js";
import { registerCommands } from "./commands/index.js";

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

registerCommands(program);

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
