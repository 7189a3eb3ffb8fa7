#include "io.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <malloc.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace liken {

void ThrowErrnoError(Napi::Env env, const char* syscall, const std::string& path, int err) {
  Napi::Error e =
      Napi::Error::New(env, std::string(syscall) + " " + path + ": " + std::strerror(err));
  e.Set("errno", Napi::Number::New(env, err));
  e.Set("syscall", Napi::String::New(env, syscall));
  e.Set("path", Napi::String::New(env, path));
  e.ThrowAsJavaScriptException();
}

int PwriteAll(int fd, const uint8_t* buf, size_t len, uint64_t off) {
  while (len > 0) {
    ssize_t n = pwrite(fd, buf, len, static_cast<off_t>(off));
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    // A zero-length write means the medium has no room left at this offset.
    if (n == 0) return ENOSPC;
    buf += n;
    len -= static_cast<size_t>(n);
    off += static_cast<uint64_t>(n);
  }
  return 0;
}

// discard(path, offset, length): tells the medium the range holds nothing worth keeping,
// so a withdrawn slot cannot be mistaken for data (BLKDISCARD on a device, a punched hole
// in a file). Offsets are validated and aligned by the TypeScript face.
Napi::Value Discard(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const std::string path = info[0].As<Napi::String>().Utf8Value();
  const uint64_t offset = static_cast<uint64_t>(info[1].As<Napi::Number>().Int64Value());
  const uint64_t length = static_cast<uint64_t>(info[2].As<Napi::Number>().Int64Value());
  int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    ThrowErrnoError(env, "open", path, errno);
    return env.Undefined();
  }
  struct stat st;
  int rc = fstat(fd, &st);
  const char* call = "fstat";
  if (rc == 0 && S_ISBLK(st.st_mode)) {
    uint64_t range[2] = {offset, length};
    call = "ioctl(BLKDISCARD)";
    rc = ioctl(fd, BLKDISCARD, &range);
  } else if (rc == 0) {
    call = "fallocate(PUNCH_HOLE)";
    rc = fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset),
                   static_cast<off_t>(length));
  }
  int err = errno;
  close(fd);
  if (rc != 0) {
    ThrowErrnoError(env, call, path, err);
    return env.Undefined();
  }
  return Napi::Boolean::New(env, true);
}

// fsyncPath(path): fsync of a file, a block device or a directory (the last step of an
// atomic replace: write temp, fsync, rename, fsync the directory).
Napi::Value FsyncPath(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const std::string path = info[0].As<Napi::String>().Utf8Value();
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    ThrowErrnoError(env, "open", path, errno);
    return env.Undefined();
  }
  int rc = fsync(fd);
  int err = errno;
  close(fd);
  if (rc != 0) ThrowErrnoError(env, "fsync", path, err);
  return env.Undefined();
}

// setImmutable(path, on): sets or clears the file's immutable attribute (chattr +i / -i) and
// returns whether it was set, or null when the filesystem keeps no attribute flags. efivarfs
// makes every variable file of a vendor GUID it does not know immutable: it must be cleared
// before the variable is rewritten or deleted, as bootctl does.
Napi::Value SetImmutable(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const std::string path = info[0].As<Napi::String>().Utf8Value();
  const bool on = info[1].As<Napi::Boolean>().Value();
  int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    ThrowErrnoError(env, "open", path, errno);
    return env.Undefined();
  }
  int flags = 0;
  if (ioctl(fd, FS_IOC_GETFLAGS, &flags) != 0) {
    int err = errno;
    close(fd);
    if (err == ENOTTY || err == EOPNOTSUPP || err == ENOSYS || err == EINVAL) return env.Null();
    ThrowErrnoError(env, "ioctl(FS_IOC_GETFLAGS)", path, err);
    return env.Undefined();
  }
  const bool was = (flags & FS_IMMUTABLE_FL) != 0;
  if (was != on) {
    int next = on ? (flags | FS_IMMUTABLE_FL) : (flags & ~FS_IMMUTABLE_FL);
    if (ioctl(fd, FS_IOC_SETFLAGS, &next) != 0) {
      int err = errno;
      close(fd);
      ThrowErrnoError(env, "ioctl(FS_IOC_SETFLAGS)", path, err);
      return env.Undefined();
    }
  }
  close(fd);
  return Napi::Boolean::New(env, was);
}

// sdNotify(state): one datagram to $NOTIFY_SOCKET, as sd_notify(3) sends it. Returns false
// when the service does not run under systemd Type=notify (no socket named), true once sent.
// A name starting with '@' is in the abstract namespace.
Napi::Value SdNotify(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const std::string state = info[0].As<Napi::String>().Utf8Value();
  const char* sock = std::getenv("NOTIFY_SOCKET");
  if (sock == nullptr || sock[0] == '\0') return Napi::Boolean::New(env, false);
  const std::string name(sock);
  struct sockaddr_un addr;
  std::memset(&addr, 0, sizeof(addr));
  addr.sun_family = AF_UNIX;
  if (name.size() >= sizeof(addr.sun_path) || (name[0] != '/' && name[0] != '@')) {
    ThrowErrnoError(env, "sd_notify", name, EINVAL);
    return env.Undefined();
  }
  std::memcpy(addr.sun_path, name.data(), name.size());
  if (name[0] == '@') addr.sun_path[0] = '\0';
  socklen_t len = static_cast<socklen_t>(offsetof(struct sockaddr_un, sun_path) + name.size());
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    ThrowErrnoError(env, "socket", name, errno);
    return env.Undefined();
  }
  ssize_t n = sendto(fd, state.data(), state.size(), MSG_NOSIGNAL,
                     reinterpret_cast<struct sockaddr*>(&addr), len);
  int err = errno;
  close(fd);
  if (n < 0) {
    ThrowErrnoError(env, "sendto", name, err);
    return env.Undefined();
  }
  return Napi::Boolean::New(env, true);
}

// trimMemory(): glibc's malloc_trim(0). Parsing and compiling a module's code (and TLS, and
// V8's compiler threads) leave freed malloc memory in the middle of the arenas, which free()
// does not hand back: only the top of the main arena is trimmed by itself. This returns every
// whole free page of every arena to the kernel. True when some memory was released.
Napi::Value TrimMemory(const Napi::CallbackInfo& info) {
  return Napi::Boolean::New(info.Env(), malloc_trim(0) == 1);
}

}  // namespace liken
