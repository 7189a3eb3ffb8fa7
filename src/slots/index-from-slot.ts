// The chunk index of an artifact, made again from the slot that holds it. A slot written in
// full keeps no index (nothing of it was local, so none was fetched: the channel's pages cost
// bytes a machine on its own does not need), yet its peers ask it for one. The index is the
// artifact's bytes cut in fixed chunks, so the slot's own bytes give it back, at the cost of
// one read, and only when a peer asks. It is kept only when it is the index release.yaml
// names: a release built with other chunks gets none here, and its peers take the channel's.
import { createReadStream } from "node:fs";
import { IndexWriter } from "../verify/chunk-index.js";
import { digestOf } from "../verify/digest.js";

export async function indexFromSlot(o: {
  device: string;
  offset: number;
  size: number;
  /** release.yaml's digest of the index. */
  digest: string;
}): Promise<Buffer | undefined> {
  const w = new IndexWriter();
  if (o.size > 0) {
    const stream = createReadStream(o.device, {
      start: o.offset,
      end: o.offset + o.size - 1,
      highWaterMark: 1024 * 1024,
    });
    for await (const b of stream) w.update(b as Buffer);
  }
  const bytes = w.finish();
  return digestOf(bytes) === o.digest ? bytes : undefined;
}
