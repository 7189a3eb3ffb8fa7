// The lean entry of `liken agent run|download|status|verify` (main.ts sends `liken agent ...`
// here; `node dist/cli/agent-main.js agent ...` runs it directly). Only the agent's commands
// are registered, and each loads what it runs when it runs: the daemon its lean API client,
// the download child HTTP, the writer and the release check (docs/agent.md, "Memory").
import { registerAgent } from "./commands/agent.js";
import { addAgentRunCommand } from "./commands/agent-run.js";
import { runCli } from "./program.js";

await runCli((program) => addAgentRunCommand(registerAgent(program)));
