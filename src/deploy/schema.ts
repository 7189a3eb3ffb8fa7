// Where the published JSON Schemas of liken's config files live in the repository.
import path from "node:path";
import { REPO_ROOT } from "../controlplane/paths.js";

/** agent.yaml's schema, for yaml-language-server (docs/agent.md, "In an editor"). */
export const AGENT_SCHEMA_FILE = path.join(REPO_ROOT, "config", "schema", "agent.schema.json");
