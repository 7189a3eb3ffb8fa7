// The V8 flags of the agent's own process, given by its systemd unit (LIKEN_NODE_FLAGS in
// config/systemd/liken-agent.service, which the launcher puts on node's command line: node
// refuses --no-opt and --optimize-for-size in NODE_OPTIONS) and by the lab to its agents
// (src/lab/machine.ts).
//
// --max-semi-space-size=1 (MiB): V8's young generation grows from 1 MiB to 16 MiB per
// semi-space while a process allocates fast, which the agent does only while it starts
// (parsing and compiling its modules); the pages it touched then stay resident, empty, for the
// life of the process. Capped, the idle agent's RSS measured about 6 MiB lower (issue 43,
// docs/agent.md "Memory"); an idle agent allocates little, so the extra scavenges cost no
// measurable CPU (bench:agent's idle-cpu figure). The download child has the same cap among
// its own flags (DOWNLOAD_NODE_FLAGS).
//
// --no-opt, --optimize-for-size: no TurboFan (its compile zones, its optimized code, the part of
// Node's binary it runs) and V8's heap sized for memory over speed. The idle agent's work is a
// loop turn every 5 s and a heartbeat every 10 s, I/O bound; the download child runs without
// TurboFan too (docs/adr/download-child-compilers.md). Together about 3.7 MiB less in a bare
// Node 20 with the agent's modules (2.3 anonymous, 1.4 of Node's binary); 5.1 MiB in bench:agent,
// whose idle CPU did not grow (20 ms per minute; docs/agent.md, "Memory").
export const AGENT_NODE_OPTIONS = [
  "--max-semi-space-size=1",
  "--no-opt",
  "--optimize-for-size",
] as const;
