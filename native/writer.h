// The streaming slot writer: bytes of one artifact in, SHA-256 and aligned O_DIRECT writes
// out, off the main thread and pipelined (main thread copies -> hash thread -> write thread).
#pragma once

#include <napi.h>

namespace liken {

void InitWriter(Napi::Env env, Napi::Object exports);

}  // namespace liken
