// Where the seeded writer's verified chunks go (./seeded.ts): to the slot writer, in artifact
// order, minus whatever precedes the writer's resume position (a resumed download re-reads the
// chunk that holds its resume point), with a checkpoint taken when one is due.
import type { SlotWriter } from "../native/writer.js";
import type { Checkpointer } from "./artifact.js";

/** Hands verified chunk bytes to the writer, dropping what precedes its resume position. */
export class Sink {
  constructor(
    private readonly w: SlotWriter,
    private readonly cps: Checkpointer,
  ) {}

  async push(at: number, slices: Buffer[]): Promise<void> {
    for (const s of slices) {
      const skip = Math.max(0, this.w.position - at);
      if (skip < s.length) await this.w.write(skip > 0 ? s.subarray(skip) : s);
      at += s.length;
    }
    this.cps.maybe();
  }
}
