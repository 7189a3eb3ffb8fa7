// The peer server's rate limit: one token bucket shared by every request.
import { describe, expect, it } from "vitest";
import { ByteBucket } from "../../src/slots/peer-serve.js";

describe("ByteBucket", () => {
  it("lets a second's worth through at once, then paces to the rate", async () => {
    const b = new ByteBucket(1_000_000);
    const t0 = Date.now();
    await b.take(1_000_000);
    expect(Date.now() - t0).toBeLessThan(100);
    await b.take(400_000);
    await b.take(100_000);
    // 500 kB more at 1 MB/s: half a second (timers may fire a little late, never early).
    expect(Date.now() - t0).toBeGreaterThanOrEqual(480);
  });

  it("is shared: two takers together get the rate, not twice it", async () => {
    const b = new ByteBucket(1_000_000);
    await b.take(1_000_000);
    const t0 = Date.now();
    await Promise.all([b.take(250_000), b.take(250_000)]);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(480);
  });
});
