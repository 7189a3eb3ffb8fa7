// Device and file facts Node cannot read by itself: the size of a block device
// (ioctl BLKGETSIZE64) as well as of a regular file, and the logical sector size that
// O_DIRECT alignment must respect.
#pragma once

#include <napi.h>

namespace liken {

// deviceInfo(path: string): { size: bigint-safe number, kind: "block" | "file", logicalBlockSize: number }
Napi::Value DeviceInfo(const Napi::CallbackInfo& info);

}  // namespace liken
