// SHA-256 digests (OpenSSL), for model fingerprints and checkpoint checksums.
#ifndef CONVOY_COMMON_SUPPORT_SHA256_H_
#define CONVOY_COMMON_SUPPORT_SHA256_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

typedef struct evp_md_ctx_st EVP_MD_CTX;  // <openssl/evp.h>

namespace convoy {

// Lower-case hex SHA-256 of `data`.
std::string Sha256Hex(absl::string_view data);

// Lower-case hex SHA-256 of a file's contents, with its size. Errors: NOT_FOUND / INTERNAL naming the path.
struct FileDigest {
  std::string sha256;
  uint64_t size = 0;
};
absl::StatusOr<FileDigest> Sha256OfFile(const std::string& path);

// SHA-256 of a stream of bytes fed in pieces (OpenSSL's EVP digest), for files written or read
// piece by piece. Not thread-safe.
class Sha256Stream {
 public:
  Sha256Stream();
  ~Sha256Stream();
  Sha256Stream(const Sha256Stream&) = delete;
  Sha256Stream& operator=(const Sha256Stream&) = delete;

  void Update(const void* data, size_t n);
  // The 32 bytes of the digest of everything fed; the stream is done with.
  std::array<uint8_t, 32> Finish();

 private:
  EVP_MD_CTX* ctx_;
};

}  // namespace convoy

#endif  // CONVOY_COMMON_SUPPORT_SHA256_H_
