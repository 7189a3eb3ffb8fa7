// The `liken` command: wiring only. Each command group lives in src/cli/commands/ and
// registers itself on the program (commands/index.ts).
//
// `liken agent ...` runs on every machine of the fleet (the daemon, and its download child),
// so it goes to the lean entry, agent-main.ts, which never loads @kubernetes/client-node, the
// operator or the release tooling; the import below is dynamic so this file loads neither.
const [group] = process.argv.slice(2);
if (group === "agent") {
  await import("./agent-main.js");
} else {
  const { runCli } = await import("./program.js");
  const { registerCommands } = await import("./commands/index.js");
  await runCli(registerCommands);
}
