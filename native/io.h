// Small synchronous I/O helpers Node lacks: discard (BLKDISCARD / hole punch), fsync of a
// path (file, device or directory), the immutable attribute (efivarfs), sd_notify for
// systemd Type=notify services, and malloc_trim for a daemon that has finished its start-up.
#pragma once

#include <napi.h>

#include <string>

namespace liken {

// Throws a JS Error carrying errno, syscall and path (see device.cc for the same shape).
void ThrowErrnoError(Napi::Env env, const char* syscall, const std::string& path, int err);

// Writes all of buf at off; returns 0 or an errno (ENOSPC when the medium ends early).
int PwriteAll(int fd, const uint8_t* buf, size_t len, uint64_t off);

Napi::Value Discard(const Napi::CallbackInfo& info);
Napi::Value FsyncPath(const Napi::CallbackInfo& info);
Napi::Value SetImmutable(const Napi::CallbackInfo& info);
Napi::Value SdNotify(const Napi::CallbackInfo& info);
Napi::Value TrimMemory(const Napi::CallbackInfo& info);

}  // namespace liken
