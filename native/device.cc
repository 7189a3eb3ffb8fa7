#include "device.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace liken {

namespace {

// Throws a JS Error carrying the errno name and the syscall, so the TypeScript face
// can map it to a stable liken code without parsing messages.
void ThrowErrno(Napi::Env env, const char* syscall, const std::string& path, int err) {
  Napi::Error e = Napi::Error::New(env, std::string(syscall) + " " + path + ": " + std::strerror(err));
  e.Set("errno", Napi::Number::New(env, err));
  e.Set("syscall", Napi::String::New(env, syscall));
  e.Set("path", Napi::String::New(env, path));
  e.ThrowAsJavaScriptException();
}

}  // namespace

Napi::Value DeviceInfo(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  // The TypeScript face validates arguments; C++ trusts them (docs/style.md, "Native code").
  const std::string path = info[0].As<Napi::String>().Utf8Value();

  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    ThrowErrno(env, "open", path, errno);
    return env.Undefined();
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int err = errno;
    close(fd);
    ThrowErrno(env, "fstat", path, err);
    return env.Undefined();
  }

  Napi::Object out = Napi::Object::New(env);
  if (S_ISBLK(st.st_mode)) {
    uint64_t size = 0;
    int lbs = 512;
    if (ioctl(fd, BLKGETSIZE64, &size) != 0) {
      int err = errno;
      close(fd);
      ThrowErrno(env, "ioctl(BLKGETSIZE64)", path, err);
      return env.Undefined();
    }
    if (ioctl(fd, BLKSSZGET, &lbs) != 0) lbs = 512;
    out.Set("kind", Napi::String::New(env, "block"));
    out.Set("size", Napi::Number::New(env, static_cast<double>(size)));
    out.Set("logicalBlockSize", Napi::Number::New(env, lbs));
  } else if (S_ISREG(st.st_mode)) {
    out.Set("kind", Napi::String::New(env, "file"));
    out.Set("size", Napi::Number::New(env, static_cast<double>(st.st_size)));
    // st_blksize is the preferred I/O size; 4096 is the alignment O_DIRECT needs on every
    // filesystem liken targets (ext4, xfs on 4Kn or 512e disks).
    out.Set("logicalBlockSize", Napi::Number::New(env, 4096));
  } else {
    close(fd);
    Napi::Error e = Napi::Error::New(env, "not a block device or regular file: " + path);
    e.Set("errno", Napi::Number::New(env, ENOTBLK));
    e.Set("syscall", Napi::String::New(env, "fstat"));
    e.Set("path", Napi::String::New(env, path));
    e.ThrowAsJavaScriptException();
    return env.Undefined();
  }
  close(fd);
  return out;
}

}  // namespace liken
