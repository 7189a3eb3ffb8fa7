#include "readback.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

#include "sha256.h"

namespace liken {

namespace {

// Reads [from, from+want) rounded out to the alignment O_DIRECT needs; returns the number of
// wanted bytes now at buf + (from - alignedFrom), or -errno. A short read past the end of a
// file is fine as long as the wanted bytes came.
int64_t ReadAligned(int fd, uint8_t* buf, size_t cap, uint64_t at, size_t len) {
  size_t done = 0;
  while (done < len) {
    ssize_t n = pread(fd, buf + done, cap - done, static_cast<off_t>(at + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  return static_cast<int64_t>(std::min(done, len));
}

class ReadbackWorker : public Napi::AsyncWorker {
 public:
  ReadbackWorker(Napi::Env env, std::string path, uint64_t base, uint64_t size, size_t bufSize,
                 uint32_t align, bool direct)
      : Napi::AsyncWorker(env),
        path_(std::move(path)),
        base_(base),
        size_(size),
        bufSize_(bufSize),
        align_(align),
        direct_(direct),
        deferred_(Napi::Promise::Deferred::New(env)) {}

  Napi::Promise Promise() { return deferred_.Promise(); }

  // Two buffers: the reader thread fills one while this thread hashes the other.
  void Execute() override {
    int fd = open(path_.c_str(), O_RDONLY | O_CLOEXEC | (direct_ ? O_DIRECT : 0));
    if (fd < 0) return Errno("open", errno);
    uint8_t* bufs[2] = {nullptr, nullptr};
    for (auto& b : bufs) {
      void* p = nullptr;
      if (posix_memalign(&p, align_, bufSize_) != 0) {
        close(fd);
        std::free(bufs[0]);
        return Errno("posix_memalign", ENOMEM);
      }
      b = static_cast<uint8_t*>(p);
    }
    std::mutex mu;
    std::condition_variable cv;
    int64_t got[2] = {-1, -1};  // bytes ready in each buffer; -1 = empty
    int readErr = 0;
    bool quit = false;
    std::thread reader([&] {
      uint64_t pos = 0;
      for (int i = 0; pos < size_; i ^= 1) {
        {
          std::unique_lock<std::mutex> lk(mu);
          cv.wait(lk, [&] { return got[i] < 0 || quit; });
          if (quit) return;
        }
        size_t want = static_cast<size_t>(std::min<uint64_t>(bufSize_, size_ - pos));
        int64_t n = ReadAligned(fd, bufs[i], bufSize_, base_ + pos, want);
        std::lock_guard<std::mutex> lk(mu);
        if (n < 0 || static_cast<size_t>(n) < want) {
          readErr = n < 0 ? static_cast<int>(-n) : EIO;
          shortAt_ = pos + static_cast<uint64_t>(n < 0 ? 0 : n);
          got[i] = 0;
          cv.notify_all();
          return;
        }
        got[i] = n;
        pos += static_cast<uint64_t>(n);
        cv.notify_all();
      }
    });
    SHA256_CTX ctx;
    SHA256_Init(&ctx);
    uint64_t hashed = 0;
    for (int i = 0; hashed < size_; i ^= 1) {
      int64_t n;
      {
        std::unique_lock<std::mutex> lk(mu);
        cv.wait(lk, [&] { return got[i] >= 0; });
        if (readErr != 0) break;
        n = got[i];
      }
      SHA256_Update(&ctx, bufs[i], static_cast<size_t>(n));
      hashed += static_cast<uint64_t>(n);
      std::lock_guard<std::mutex> lk(mu);
      got[i] = -1;
      cv.notify_all();
    }
    {
      std::lock_guard<std::mutex> lk(mu);
      quit = true;
      cv.notify_all();
    }
    reader.join();
    close(fd);
    std::free(bufs[0]);
    std::free(bufs[1]);
    if (readErr != 0) {
      short_ = readErr == EIO;
      return Errno("pread", readErr);
    }
    unsigned char md[32];
    SHA256_Final(md, &ctx);
    digest_ = HexDigest(md);
  }

  void OnOK() override {
    Napi::Object out = Napi::Object::New(Env());
    out.Set("digest", Napi::String::New(Env(), digest_));
    deferred_.Resolve(out);
  }

  void OnError(const Napi::Error& e) override {
    Napi::Error err = Napi::Error::New(Env(), e.Message());
    err.Set("errno", Napi::Number::New(Env(), err_));
    err.Set("path", Napi::String::New(Env(), path_));
    if (short_) err.Set("shortAt", Napi::Number::New(Env(), static_cast<double>(shortAt_)));
    deferred_.Reject(err.Value());
  }

 private:
  void Errno(const char* call, int err) {
    err_ = err;
    SetError(std::string(call) + " " + path_ + ": " + std::strerror(err));
  }

  std::string path_;
  uint64_t base_, size_;
  size_t bufSize_;
  uint32_t align_;
  bool direct_;
  Napi::Promise::Deferred deferred_;
  std::string digest_;
  int err_ = 0;
  bool short_ = false;
  uint64_t shortAt_ = 0;
};

}  // namespace

Napi::Value Readback(const Napi::CallbackInfo& info) {
  Napi::Object a = info[0].As<Napi::Object>();
  auto num = [&](const char* k) {
    return static_cast<uint64_t>(a.Get(k).As<Napi::Number>().Int64Value());
  };
  auto* w = new ReadbackWorker(info.Env(), a.Get("path").As<Napi::String>().Utf8Value(),
                               num("base"), num("size"), static_cast<size_t>(num("bufSize")),
                               static_cast<uint32_t>(num("align")),
                               a.Get("direct").As<Napi::Boolean>().Value());
  Napi::Promise p = w->Promise();
  w->Queue();
  return p;
}

}  // namespace liken
