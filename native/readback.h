// Read-back verification: re-reads a range of a slot with O_DIRECT (the page cache must not
// hide what is on the medium) and hashes it, reading the next buffer while hashing this one.
#pragma once

#include <napi.h>

namespace liken {

// readback({ path, base, size, bufSize, align, direct }): Promise<{ digest: hex }>
Napi::Value Readback(const Napi::CallbackInfo& info);

}  // namespace liken
