// SHA-256 through the OpenSSL that Node itself links and exports (node binary exports the
// SHA256_* symbols; on x86-64 with SHA-NI OpenSSL picks the SHA instructions at run time).
// The low-level SHA256_CTX API is deprecated in OpenSSL 3 but it is the one API whose state
// is a plain struct: liken must save and restore the hash state across an agent restart
// (update_engine does the same with its serialized context), which EVP cannot do.
#pragma once

#define OPENSSL_SUPPRESS_DEPRECATED 1
#include <openssl/sha.h>

#include <cstdint>
#include <cstring>
#include <string>

namespace liken {

// The exported hash state: a magic tag, the struct size, then the SHA256_CTX bytes. The
// tag and size make a state from another build refuse to load instead of hashing garbage.
constexpr uint32_t kHashStateMagic = 0x4c4b5348;  // "LKSH"

inline std::string HexDigest(const unsigned char* md) {
  static const char* kHex = "0123456789abcdef";
  std::string out(64, '0');
  for (int i = 0; i < 32; i++) {
    out[2 * i] = kHex[md[i] >> 4];
    out[2 * i + 1] = kHex[md[i] & 15];
  }
  return out;
}

inline size_t HashStateSize() { return 8 + sizeof(SHA256_CTX); }

inline void ExportHashState(const SHA256_CTX& ctx, uint8_t* out) {
  uint32_t magic = kHashStateMagic;
  uint32_t size = sizeof(SHA256_CTX);
  std::memcpy(out, &magic, 4);
  std::memcpy(out + 4, &size, 4);
  std::memcpy(out + 8, &ctx, sizeof(SHA256_CTX));
}

inline bool ImportHashState(const uint8_t* in, size_t len, SHA256_CTX* ctx) {
  if (len != HashStateSize()) return false;
  uint32_t magic = 0;
  uint32_t size = 0;
  std::memcpy(&magic, in, 4);
  std::memcpy(&size, in + 4, 4);
  if (magic != kHashStateMagic || size != sizeof(SHA256_CTX)) return false;
  std::memcpy(ctx, in + 8, sizeof(SHA256_CTX));
  return true;
}

}  // namespace liken
