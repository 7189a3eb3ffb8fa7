// liken's native addon: the byte path and what Node cannot do by itself.
// Every export is validated and given defaults by src/native/index.ts.
#include <napi.h>

#include "device.h"

namespace {

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("deviceInfo", Napi::Function::New(env, liken::DeviceInfo, "deviceInfo"));
  return exports;
}

}  // namespace

NODE_API_MODULE(liken_native, Init)
