// Preloaded into each agent by bench/agent-profile.ts (NODE_OPTIONS=--require ..., because
// Node 20 refuses --cpu-prof there). SIGUSR2 starts the window, the next SIGUSR2 ends it. In
// the window: LIKEN_PROFILE=cpu runs V8's sampling profiler (written to
// <LIKEN_PROFILE_DIR>/<pid>.cpuprofile at the end), LIKEN_PROFILE=gc traces every collection
// to stdout (--trace-gc), so the window's collections can be counted and timed.
"use strict";
const { Session } = require("node:inspector");
const { writeFileSync } = require("node:fs");
const path = require("node:path");
const v8 = require("node:v8");

const dir = process.env.LIKEN_PROFILE_DIR;
const mode = process.env.LIKEN_PROFILE ?? "cpu";
const interval = Number(process.env.LIKEN_PROFILE_INTERVAL_US ?? 1000);
let session;
let running = false;
process.on("SIGUSR2", () => {
  if (!running) {
    running = true;
    if (mode === "gc") {
      process.stdout.write('{"msg":"gc window begins"}\n');
      return v8.setFlagsFromString("--trace-gc");
    }
    session = new Session();
    session.connect();
    session.post("Profiler.enable", () =>
      session.post("Profiler.setSamplingInterval", { interval }, () =>
        session.post("Profiler.start"),
      ),
    );
    return;
  }
  running = false;
  if (mode === "gc") {
    v8.setFlagsFromString("--no-trace-gc");
    process.stdout.write('{"msg":"gc window ends"}\n');
    return writeFileSync(path.join(dir, `${process.pid}.done`), "");
  }
  session.post("Profiler.stop", (err, res) => {
    if (!err)
      writeFileSync(path.join(dir, `${process.pid}.cpuprofile`), JSON.stringify(res.profile));
    session.disconnect();
  });
});
