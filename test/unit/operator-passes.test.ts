// One decision per burst of events (src/operator/run/passes.ts), with a bound on how long the
// first event of a burst waits. Real timers; no assertion rests on a fixed sleep: each waits
// for the passes it expects, with a generous deadline, and the bound is checked against the
// time measured, not a sleep.
import { setImmediate as tick } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { BURST_MS, PassScheduler } from "../../src/operator/run/passes.js";

async function until(cond: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 2));
  }
}

function recorder(passMs = 0): {
  scheduler: PassScheduler;
  passes: { key: string; at: number }[];
  release: () => void;
} {
  const passes: { key: string; at: number }[] = [];
  let open: () => void = () => {};
  const scheduler = new PassScheduler(
    async (key) => {
      passes.push({ key, at: performance.now() });
      if (passMs < 0) await new Promise<void>((r) => (open = r));
      else if (passMs > 0) await new Promise((r) => setTimeout(r, passMs));
    },
    { onError: () => {} },
  );
  return { scheduler, passes, release: () => open() };
}

describe("passes: one decision per burst of events", () => {
  it("a burst of 1,000 events in one turn is one pass", async () => {
    const { scheduler, passes } = recorder();
    for (let i = 0; i < 1000; i++) scheduler.schedule("c");
    await until(() => passes.length >= 1);
    await new Promise((r) => setTimeout(r, 20)); // nothing more comes (checked below)
    expect(passes.map((p) => p.key)).toEqual(["c"]);
  });

  it("events while a pass runs make one more pass, not one each", async () => {
    const { scheduler, passes, release } = recorder(-1);
    scheduler.schedule("c");
    await until(() => passes.length === 1);
    for (let i = 0; i < 500; i++) scheduler.schedule("c");
    release();
    await until(() => passes.length === 2);
    release();
    await new Promise((r) => setTimeout(r, 20));
    expect(passes.length).toBe(2);
  });

  it("an event that lands in the turn a pass ends joins the next pass (a turn of the loop between passes)", async () => {
    const passes: number[] = [];
    let open: () => void = () => {};
    const scheduler = new PassScheduler(
      async () => {
        passes.push(performance.now());
        // Only the first pass waits (a status write's round trip).
        if (passes.length === 1) await new Promise<void>((r) => (open = r));
      },
      { onError: () => {} },
    );
    scheduler.schedule("c");
    await until(() => passes.length === 1);
    scheduler.schedule("c"); // during the pass: one more pass is due
    // The pass ends, and in the same turn of the loop one more event of the burst is
    // handed over (a watch chunk parsed in the poll phase that also delivered the answer).
    open();
    void tick().then(() => scheduler.schedule("c"));
    await until(() => passes.length >= 2);
    await new Promise((r) => setTimeout(r, 30));
    // Without the turn between passes: three (the second pass ran before that event landed).
    expect(passes.length).toBe(2);
  });

  it(`a steady stream of events never pushes the first pass back beyond BURST_MS (${BURST_MS} ms) plus timer lateness`, async () => {
    const { scheduler, passes } = recorder();
    const first = performance.now();
    scheduler.schedule("c");
    // An event every millisecond until the pass: a debounce that restarts on each event
    // would never pass while the stream lasts.
    const stream = setInterval(() => scheduler.schedule("c"), 1);
    try {
      await until(() => passes.length >= 1, 5000);
    } finally {
      clearInterval(stream);
    }
    const waited = passes[0]!.at - first;
    // Timers fire late on a loaded machine: 150 ms is far past the bound, far short of 5 s.
    expect(waited).toBeLessThan(150);
  });

  it("stop() forgets what is dirty; start() takes events again", async () => {
    const { scheduler, passes } = recorder();
    scheduler.schedule("c");
    scheduler.stop();
    scheduler.schedule("c");
    await new Promise((r) => setTimeout(r, 30));
    expect(passes).toEqual([]);
    scheduler.start();
    scheduler.schedule("c");
    await until(() => passes.length === 1);
  });

  it("each pass reports how long its first event waited (from that event, not an earlier pass) and how long it took", async () => {
    const reports: { wait: number; took: number }[] = [];
    let open: () => void = () => {};
    let calls = 0;
    const scheduler = new PassScheduler(
      async () => {
        // The first pass is held open (a status write in flight); the second takes 20 ms.
        if (++calls === 1) await new Promise<void>((r) => (open = r));
        else await new Promise((r) => setTimeout(r, 20));
      },
      { onError: () => {}, onPass: (_k, wait, took) => reports.push({ wait, took }) },
    );
    scheduler.schedule("c");
    await until(() => calls === 1);
    const during = performance.now();
    scheduler.schedule("c"); // waits for the pass in flight
    await until(() => performance.now() - during >= 40);
    scheduler.schedule("c"); // the same burst: its wait is still the first event's
    open();
    await until(() => reports.length === 2);
    // The second event waited for the first pass (>= 40 ms, counted from the event itself).
    expect(reports[1]!.wait).toBeGreaterThanOrEqual(40);
    expect(reports[1]!.took).toBeGreaterThanOrEqual(19);
    // The first pass's took is the time it was held: at least the 40 ms above.
    expect(reports[0]!.took).toBeGreaterThanOrEqual(40);
  });
});

describe("passes: a pass that does not end is named", () => {
  it("onSlow names the key once the pass has run slowMs, and not a pass that ended in time", async () => {
    const slow: { key: string; ms: number }[] = [];
    let open: () => void = () => {};
    const scheduler = new PassScheduler(
      async (key) => {
        if (key === "hung") await new Promise<void>((r) => (open = r));
      },
      { onError: () => {}, slowMs: 50, onSlow: (key, ms) => slow.push({ key, ms }) },
    );
    scheduler.schedule("quick");
    scheduler.schedule("hung");
    await until(() => slow.length === 1);
    expect(slow[0]!.key).toBe("hung");
    expect(slow[0]!.ms).toBeGreaterThanOrEqual(49);
    open();
  });
});
