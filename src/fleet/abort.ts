// A deadline for one context's calls through client-node: its requests carry the signal
// (client-node 1.x passes a RequestContext's signal to fetch), so a context past its deadline
// has its connections torn down instead of left to finish after the command has answered.
import { Observable, type ConfigurationOptions } from "@kubernetes/client-node";

export interface Deadline {
  signal: AbortSignal;
  /** Whether the deadline passed (as opposed to an abort after the work was done). */
  passed(): boolean;
  /** Options for a client-node call: its request carries the signal. */
  options: ConfigurationOptions;
  /** Ends the deadline; any request still open is aborted. */
  done(): void;
}

export function deadline(ms: number): Deadline {
  const ac = new AbortController();
  let passed = false;
  const timer = setTimeout(() => {
    passed = true;
    ac.abort();
  }, ms);
  return {
    signal: ac.signal,
    passed: () => passed,
    options: {
      middleware: [
        {
          pre: (ctx) => {
            ctx.setSignal(ac.signal);
            return new Observable(Promise.resolve(ctx));
          },
          post: (ctx) => new Observable(Promise.resolve(ctx)),
        },
      ],
      middlewareMergeStrategy: "append",
    },
    done: () => {
      clearTimeout(timer);
      ac.abort();
    },
  };
}
