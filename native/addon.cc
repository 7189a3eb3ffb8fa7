// liken's native addon: the byte path and what Node cannot do by itself.
// Every export is validated and given defaults by src/native/index.ts.
#include <napi.h>

#include "device.h"
#include "io.h"
#include "readback.h"
#include "writer.h"

namespace {

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("deviceInfo", Napi::Function::New(env, liken::DeviceInfo, "deviceInfo"));
  exports.Set("discard", Napi::Function::New(env, liken::Discard, "discard"));
  exports.Set("fsyncPath", Napi::Function::New(env, liken::FsyncPath, "fsyncPath"));
  exports.Set("setImmutable", Napi::Function::New(env, liken::SetImmutable, "setImmutable"));
  exports.Set("sdNotify", Napi::Function::New(env, liken::SdNotify, "sdNotify"));
  exports.Set("trimMemory", Napi::Function::New(env, liken::TrimMemory, "trimMemory"));
  exports.Set("readback", Napi::Function::New(env, liken::Readback, "readback"));
  liken::InitWriter(env, exports);
  return exports;
}

}  // namespace

NODE_API_MODULE(liken_native, Init)
