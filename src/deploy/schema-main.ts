// `npm run schema:generate [-- --check]`: writes the JSON Schema of agent.yaml, generated from
// its one declaration (src/agent/config-schema.ts), to config/schema/agent.schema.json, where
// editors find it (docs/agent.md, "In an editor"). With --check it writes nothing and exits 1
// when the committed file is stale (test/unit/config-schema.test.ts checks the same). Wiring only.
import { readFileSync, mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { format } from "prettier";
import { agentJsonSchema } from "../agent/config-schema.js";
import { AGENT_SCHEMA_FILE } from "./schema.js";

const check = process.argv.includes("--check");
const want = await format(JSON.stringify(agentJsonSchema()), { parser: "json" });
const have = (() => {
  try {
    return readFileSync(AGENT_SCHEMA_FILE, "utf8");
  } catch {
    return "";
  }
})();
const rel = path.relative(process.cwd(), AGENT_SCHEMA_FILE);
if (have === want) process.stderr.write(`${rel}: up to date\n`);
else if (check) {
  process.stderr.write(
    `${rel} is stale against src/agent/config-schema.ts; run npm run schema:generate\n`,
  );
  process.exitCode = 1;
} else {
  mkdirSync(path.dirname(AGENT_SCHEMA_FILE), { recursive: true });
  writeFileSync(AGENT_SCHEMA_FILE, want);
  process.stderr.write(`${rel}: written\n`);
}
