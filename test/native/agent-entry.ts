// `liken agent ...` with only the agent command group loaded: the same commander wiring and
// error handling as src/cli/main.ts, without loading the Kubernetes client for every spawn
// (the SIGKILL test starts this process many times).
import { Command } from "commander";
import { LikenError } from "../../src/errors.js";
import { registerAgent } from "../../src/cli/commands/agent.js";

const program = new Command("liken").exitOverride();
registerAgent(program);
try {
  await program.parseAsync(process.argv);
} catch (e) {
  process.stderr.write(
    `liken: ${e instanceof LikenError ? `${e.message} [${e.code}]` : String(e)}\n`,
  );
  process.exitCode = 1;
}
