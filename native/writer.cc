#include "writer.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "io.h"
#include "sha256.h"

namespace liken {

namespace {

// Bytes of write buffers allocated and not yet freed, across every writer of this process:
// what `finish()` and `abort()` must bring back down, whether or not V8 ever collects the
// writer (test/native/writer.test.ts reads it through writerBufferBytes()).
std::atomic<int64_t> g_bufferBytes{0};

// What went wrong, in a form the TypeScript face maps to a stable liken code.
struct Failure {
  std::string code;  // "io" | "chunk-mismatch" | "beyond-size" | "short" | "state" | "aborted"
  std::string message;
  int err = 0;
  int64_t chunk = -1;
};

struct Buffer {
  uint8_t* data = nullptr;
  size_t len = 0;
  uint64_t pos = 0;  // offset of data[0] within the artifact
  SHA256_CTX after;  // whole-stream mode: the hash state once this buffer is hashed
};

struct Options {
  std::string path;
  uint64_t base = 0;       // where the artifact starts on the medium (aligned)
  uint64_t size = 0;       // the declared size: not one byte more is accepted
  uint64_t start = 0;      // resume offset within the artifact (aligned)
  size_t bufSize = 0;      // one pipeline buffer; equals chunkSize when chunks are checked
  size_t nbuf = 0;
  uint32_t align = 4096;
  bool direct = true;
  std::vector<uint8_t> chunkDigests;  // 32 bytes per chunk; empty: hash the whole stream
  bool hasState = false;
  SHA256_CTX state;
};

// Pure C++: no N-API inside, so the threads and the async workers can share it safely.
// Buffers move free -> (main thread fills) -> hashQ -> writeQ -> free.
class Pipeline {
 public:
  explicit Pipeline(Options o) : o_(std::move(o)), pushed_(o_.start), written_(o_.start) {
    if (o_.hasState) {
      ctx_ = o_.state;
    } else {
      SHA256_Init(&ctx_);
    }
    durable_ = ctx_;
  }

  ~Pipeline() {
    Stop();
    CloseFds();
    ReleaseBuffers();
  }

  bool chunked() const { return !o_.chunkDigests.empty(); }

  bool Open(Failure* f) {
    int flags = O_WRONLY | O_CLOEXEC;
    dfd_ = open(o_.path.c_str(), flags | (o_.direct ? O_DIRECT : 0));
    // Name the call that was made: O_DIRECT is off for media that refuse it (tmpfs).
    if (dfd_ < 0) return SetOpenFailure(f, o_.direct ? "open(O_DIRECT)" : "open");
    // The unaligned tail goes through the page cache: O_DIRECT cannot write it without
    // padding, and padding would overwrite whatever follows the artifact in the slot.
    bfd_ = open(o_.path.c_str(), flags);
    if (bfd_ < 0) return SetOpenFailure(f, "open");
    bufs_.resize(o_.nbuf);
    for (size_t i = 0; i < o_.nbuf; i++) {
      void* p = nullptr;
      if (posix_memalign(&p, o_.align, o_.bufSize) != 0) {
        f->code = "io";
        f->message = "cannot allocate aligned buffers";
        f->err = ENOMEM;
        return false;
      }
      bufs_[i].data = static_cast<uint8_t*>(p);
      g_bufferBytes += static_cast<int64_t>(o_.bufSize);
      free_.push_back(static_cast<int>(i));
    }
    // Named, so /proc/<pid>/task/*/comm tells their CPU apart (bench:write reports it).
    hashThread_ = std::thread([this] {
      pthread_setname_np(pthread_self(), "liken-hash");
      HashLoop();
    });
    writeThread_ = std::thread([this] {
      pthread_setname_np(pthread_self(), "liken-write");
      WriteLoop();
    });
    return true;
  }

  // Main thread only. Copies as much of src as free buffers allow; returns bytes taken.
  // Returns -1 with *f set when the writer has failed or src goes beyond the declared size.
  int64_t Push(const uint8_t* src, size_t len, Failure* f) {
    if (Failed(f)) return -1;
    if (released_) {
      *f = {"state", "the writer is finished; no byte can be added", 0, -1};
      return -1;
    }
    if (pushed_ + len > o_.size) {
      // Must never write a byte beyond the declared size: endless data stops here.
      Fail({"beyond-size",
            std::to_string(pushed_ + len - o_.size) + " bytes beyond the declared size " +
                std::to_string(o_.size),
            0, -1});
      Failed(f);
      return -1;
    }
    size_t taken = 0;
    while (taken < len) {
      if (fill_ < 0 && !TakeFree()) break;
      Buffer& b = bufs_[fill_];
      size_t n = std::min(o_.bufSize - b.len, len - taken);
      std::memcpy(b.data + b.len, src + taken, n);
      b.len += n;
      taken += n;
      pushed_ += n;
      if (b.len == o_.bufSize) Enqueue();
    }
    return static_cast<int64_t>(taken);
  }

  // Main thread: hands the partly filled buffer (the artifact's tail) to the pipeline.
  void FlushTail() {
    if (fill_ >= 0 && bufs_[fill_].len > 0) Enqueue();
  }

  // Worker thread: blocks until a buffer is free or the writer failed.
  void WaitSpace() {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [this] { return !free_.empty() || failed_; });
  }

  // Worker thread: blocks until every queued buffer is hashed and written.
  void WaitIdle() {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [this] {
      return failed_ || (hashQ_.empty() && writeQ_.empty() && !busyHash_ && !busyWrite_);
    });
  }

  // Worker thread: the durable resume point. Every byte before `offset` is on the medium
  // (fdatasync) and, without chunks, `state` is the hash of exactly those bytes. It does not
  // drain the pipeline: the write thread writes buffers in order, so what it has written is
  // always a prefix, and each buffer carries the hash state after it.
  bool Checkpoint(uint64_t* offset, std::vector<uint8_t>* state, Failure* f) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (failed_) {
        *f = failure_;
        return false;
      }
      *offset = written_;
      state->resize(HashStateSize());
      ExportHashState(durable_, state->data());
    }
    if (fdatasync(dfd_) != 0) {
      Fail({"io", std::string("fdatasync: ") + std::strerror(errno), errno, -1});
      Failed(f);
      return false;
    }
    return true;
  }

  // Worker thread: drains, checks the size, syncs, closes. digest is empty with chunks:
  // each chunk was checked before it was written, and the read-back hashes the whole.
  bool Finish(std::string* digest, Failure* f) {
    WaitIdle();
    Stop();
    // The buffers are done with whatever the outcome: give them back now, not when the
    // JavaScript object is collected (a small object V8 may keep for seconds, holding
    // bufSize x nbuf bytes while the read-back allocates its own).
    ReleaseBuffers();
    if (Failed(f)) return false;
    if (written_ != o_.size) {
      f->code = "short";
      f->message = "got " + std::to_string(written_) + " of the declared " +
                   std::to_string(o_.size) + " bytes";
      return false;
    }
    // Sync before success: the caller marks the slot staged only after this returns.
    if (fdatasync(bfd_) != 0 || fdatasync(dfd_) != 0) {
      f->code = "io";
      f->err = errno;
      f->message = std::string("fdatasync: ") + std::strerror(errno);
      return false;
    }
    CloseFds();
    if (!chunked()) {
      unsigned char md[32];
      SHA256_Final(md, &ctx_);
      *digest = HexDigest(md);
    }
    return true;
  }

  // Main thread only (push() is refused from here on: the writer has failed).
  void Abort() {
    Fail({"aborted", "the write was aborted", 0, -1});
    Stop();
    CloseFds();
    fill_ = -1;
    ReleaseBuffers();
  }

  // Main thread, before finish() is queued: push() is refused from then on, so the worker
  // that runs Finish() may free the buffers while nothing on the main thread can touch them.
  void Close() { released_ = true; }

  uint64_t pushed() const { return pushed_; }

 private:
  bool SetOpenFailure(Failure* f, const char* call) {
    f->code = "io";
    f->err = errno;
    f->message = std::string(call) + " " + o_.path + ": " + std::strerror(errno);
    return false;
  }

  bool Failed(Failure* f) {
    std::lock_guard<std::mutex> lk(mu_);
    if (failed_) *f = failure_;
    return failed_;
  }

  void Fail(Failure f) {
    std::lock_guard<std::mutex> lk(mu_);
    if (!failed_) {
      failed_ = true;
      failure_ = std::move(f);
    }
    cv_.notify_all();
  }

  bool TakeFree() {
    std::lock_guard<std::mutex> lk(mu_);
    if (free_.empty()) return false;
    fill_ = free_.front();
    free_.pop_front();
    bufs_[fill_].len = 0;
    bufs_[fill_].pos = pushed_;
    return true;
  }

  void Enqueue() {
    std::lock_guard<std::mutex> lk(mu_);
    hashQ_.push_back(fill_);
    fill_ = -1;
    cv_.notify_all();
  }

  // The write thread still drains what the hash thread passed after a failure: those chunks
  // precede the bad one, so the medium holds every verified byte up to the failure.
  int Next(std::deque<int>* q, bool* busy, bool drain) {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return stop_ || failed_ || !q->empty(); });
    if ((stop_ || failed_) && !(drain && !q->empty())) return -1;
    int i = q->front();
    q->pop_front();
    *busy = true;
    return i;
  }

  void HashLoop() {
    for (;;) {
      int i = Next(&hashQ_, &busyHash_, false);
      if (i < 0) return;
      const Buffer& b = bufs_[i];
      if (chunked()) {
        // Refuse a bad range before it is written: the caller fetches it again.
        uint64_t chunk = b.pos / o_.bufSize;
        unsigned char md[32];
        SHA256(b.data, b.len, md);
        bool known = (chunk + 1) * 32 <= o_.chunkDigests.size();
        if (!known || std::memcmp(md, o_.chunkDigests.data() + chunk * 32, 32) != 0) {
          Fail({"chunk-mismatch", "chunk " + std::to_string(chunk) + " has digest sha256:" +
                                      HexDigest(md),
                0, static_cast<int64_t>(chunk)});
          Done(&busyHash_);
          return;
        }
      } else {
        SHA256_Update(&ctx_, b.data, b.len);
        bufs_[i].after = ctx_;
      }
      std::lock_guard<std::mutex> lk(mu_);
      busyHash_ = false;
      writeQ_.push_back(i);
      cv_.notify_all();
    }
  }

  void WriteLoop() {
    for (;;) {
      int i = Next(&writeQ_, &busyWrite_, true);
      if (i < 0) return;
      const Buffer& b = bufs_[i];
      size_t aligned = b.len & ~static_cast<size_t>(o_.align - 1);
      int err = PwriteAll(dfd_, b.data, aligned, o_.base + b.pos);
      if (err == 0 && aligned < b.len) {
        err = PwriteAll(bfd_, b.data + aligned, b.len - aligned, o_.base + b.pos + aligned);
      }
      if (err != 0) {
        std::string what = err == ENOSPC ? "the medium ends before the artifact does"
                                         : std::string(std::strerror(err));
        Fail({"io", "write at " + std::to_string(o_.base + b.pos) + ": " + what, err, -1});
        Done(&busyWrite_);
        return;
      }
      std::lock_guard<std::mutex> lk(mu_);
      written_ = b.pos + b.len;
      if (!chunked()) durable_ = b.after;
      busyWrite_ = false;
      free_.push_back(i);
      cv_.notify_all();
    }
  }

  void Done(bool* busy) {
    std::lock_guard<std::mutex> lk(mu_);
    *busy = false;
    cv_.notify_all();
  }

  // Callable from the main thread (Abort) and a worker (Finish) at once: joinMu_ makes the
  // second caller wait for the first join instead of joining the same thread twice.
  void Stop() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
      cv_.notify_all();
    }
    std::lock_guard<std::mutex> lk(joinMu_);
    if (hashThread_.joinable()) hashThread_.join();
    if (writeThread_.joinable()) writeThread_.join();
  }

  // Only once both threads are joined (Stop): nothing else reads the buffers then.
  void ReleaseBuffers() {
    std::lock_guard<std::mutex> lk(mu_);
    for (auto& b : bufs_) {
      if (b.data != nullptr) g_bufferBytes -= static_cast<int64_t>(o_.bufSize);
      std::free(b.data);
      b.data = nullptr;
    }
    free_.clear();
  }

  void CloseFds() {
    if (dfd_ >= 0) close(dfd_);
    if (bfd_ >= 0) close(bfd_);
    dfd_ = bfd_ = -1;
  }

  Options o_;
  int dfd_ = -1;
  int bfd_ = -1;
  std::vector<Buffer> bufs_;
  SHA256_CTX ctx_;
  uint64_t pushed_;  // main thread only
  int fill_ = -1;    // main thread only
  bool released_ = false;  // main thread only: set by Close() before finish() is queued

  std::mutex mu_;
  std::mutex joinMu_;
  std::condition_variable cv_;
  std::deque<int> free_, hashQ_, writeQ_;
  bool busyHash_ = false, busyWrite_ = false, stop_ = false, failed_ = false;
  Failure failure_;
  uint64_t written_;
  SHA256_CTX durable_;  // the hash state of the first written_ bytes
  std::thread hashThread_, writeThread_;
};

Napi::Error ToError(Napi::Env env, const Failure& f) {
  Napi::Error e = Napi::Error::New(env, f.message);
  e.Set("writerCode", Napi::String::New(env, f.code));
  if (f.err != 0) e.Set("errno", Napi::Number::New(env, f.err));
  if (f.chunk >= 0) e.Set("chunk", Napi::Number::New(env, static_cast<double>(f.chunk)));
  return e;
}

// One async step of a writer: runs on the libuv pool, never touches N-API in Execute(),
// and settles its promise in OnOK/OnError (docs/style.md, "Native code").
class Step : public Napi::AsyncWorker {
 public:
  enum Kind { kSpace, kCheckpoint, kFinish };
  Step(Napi::Env env, std::shared_ptr<Pipeline> p, Kind k)
      : Napi::AsyncWorker(env), p_(std::move(p)), kind_(k), deferred_(Napi::Promise::Deferred::New(env)) {}
  Napi::Promise Promise() { return deferred_.Promise(); }

  void Execute() override {
    bool ok = true;
    switch (kind_) {
      case kSpace:
        p_->WaitSpace();
        break;
      case kCheckpoint:
        ok = p_->Checkpoint(&offset_, &state_, &f_);
        break;
      case kFinish:
        ok = p_->Finish(&digest_, &f_);
        break;
    }
    if (!ok) SetError(f_.message);
  }

  void OnOK() override {
    Napi::Env env = Env();
    if (kind_ == kSpace) {
      deferred_.Resolve(env.Undefined());
      return;
    }
    Napi::Object out = Napi::Object::New(env);
    if (kind_ == kCheckpoint) {
      out.Set("offset", Napi::Number::New(env, static_cast<double>(offset_)));
      out.Set("hashState", Napi::Buffer<uint8_t>::Copy(env, state_.data(), state_.size()));
    } else {
      out.Set("digest", digest_.empty() ? env.Null() : Napi::String::New(env, digest_));
    }
    deferred_.Resolve(out);
  }

  void OnError(const Napi::Error&) override { deferred_.Reject(ToError(Env(), f_).Value()); }

 private:
  std::shared_ptr<Pipeline> p_;
  Kind kind_;
  Napi::Promise::Deferred deferred_;
  Failure f_;
  uint64_t offset_ = 0;
  std::vector<uint8_t> state_;
  std::string digest_;
};

class Writer : public Napi::ObjectWrap<Writer> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "Writer",
                       {InstanceMethod<&Writer::Push>("push"),
                        InstanceMethod<&Writer::Space>("space"),
                        InstanceMethod<&Writer::Checkpoint>("checkpoint"),
                        InstanceMethod<&Writer::Finish>("finish"),
                        InstanceMethod<&Writer::Abort>("abort")});
  }

  // new Writer({ path, base, size, start, bufSize, nbuf, align, direct, chunkDigests?,
  // hashState? }): every field validated by src/native/writer.ts.
  explicit Writer(const Napi::CallbackInfo& info) : Napi::ObjectWrap<Writer>(info) {
    Napi::Env env = info.Env();
    Napi::Object a = info[0].As<Napi::Object>();
    Options o;
    o.path = a.Get("path").As<Napi::String>().Utf8Value();
    o.base = static_cast<uint64_t>(a.Get("base").As<Napi::Number>().Int64Value());
    o.size = static_cast<uint64_t>(a.Get("size").As<Napi::Number>().Int64Value());
    o.start = static_cast<uint64_t>(a.Get("start").As<Napi::Number>().Int64Value());
    o.bufSize = static_cast<size_t>(a.Get("bufSize").As<Napi::Number>().Int64Value());
    o.nbuf = static_cast<size_t>(a.Get("nbuf").As<Napi::Number>().Int64Value());
    o.align = a.Get("align").As<Napi::Number>().Uint32Value();
    o.direct = a.Get("direct").As<Napi::Boolean>().Value();
    Napi::Value chunks = a.Get("chunkDigests");
    if (chunks.IsBuffer()) {
      auto b = chunks.As<Napi::Buffer<uint8_t>>();
      o.chunkDigests.assign(b.Data(), b.Data() + b.Length());
    }
    Napi::Value state = a.Get("hashState");
    if (state.IsBuffer()) {
      auto b = state.As<Napi::Buffer<uint8_t>>();
      if (!ImportHashState(b.Data(), b.Length(), &o.state)) {
        ToError(env, {"state", "the saved hash state does not come from this build", 0, -1})
            .ThrowAsJavaScriptException();
        return;
      }
      o.hasState = true;
    }
    p_ = std::make_shared<Pipeline>(std::move(o));
    Failure f;
    if (!p_->Open(&f)) ToError(env, f).ThrowAsJavaScriptException();
  }

  ~Writer() override {
    if (p_) p_->Abort();
  }

 private:
  // push(buf): bytes taken (0 when every buffer is busy: await space() and push the rest).
  Napi::Value Push(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    auto b = info[0].As<Napi::Buffer<uint8_t>>();
    Failure f;
    int64_t n = p_->Push(b.Data(), b.Length(), &f);
    if (n < 0) {
      ToError(env, f).ThrowAsJavaScriptException();
      return env.Undefined();
    }
    return Napi::Number::New(env, static_cast<double>(n));
  }

  Napi::Value Queue(Napi::Env env, Step::Kind k) {
    auto* s = new Step(env, p_, k);
    Napi::Promise pr = s->Promise();
    s->Queue();
    return pr;
  }

  Napi::Value Space(const Napi::CallbackInfo& info) { return Queue(info.Env(), Step::kSpace); }
  Napi::Value Checkpoint(const Napi::CallbackInfo& info) {
    return Queue(info.Env(), Step::kCheckpoint);
  }
  Napi::Value Finish(const Napi::CallbackInfo& info) {
    p_->FlushTail();
    p_->Close();
    return Queue(info.Env(), Step::kFinish);
  }
  Napi::Value Abort(const Napi::CallbackInfo& info) {
    p_->Abort();
    return info.Env().Undefined();
  }

  std::shared_ptr<Pipeline> p_;
};

}  // namespace

Napi::Value WriterBufferBytes(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), static_cast<double>(g_bufferBytes.load()));
}

void InitWriter(Napi::Env env, Napi::Object exports) {
  exports.Set("Writer", Writer::Define(env));
  exports.Set("writerBufferBytes",
              Napi::Function::New(env, WriterBufferBytes, "writerBufferBytes"));
}

}  // namespace liken
