// SHA-256 digests (OpenSSL), for model fingerprints and checkpoint checksums.
#ifndef CONVOY_COMMON_SHA256_H_
#define CONVOY_COMMON_SHA256_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace convoy {

// Lower-case hex SHA-256 of `data`.
std::string Sha256Hex(absl::string_view data);

// Lower-case hex SHA-256 of a file's contents, with its size. Errors: NOT_FOUND / INTERNAL naming the path.
struct FileDigest {
  std::string sha256;
  uint64_t size = 0;
};
absl::StatusOr<FileDigest> Sha256OfFile(const std::string& path);

}  // namespace convoy

#endif  // CONVOY_COMMON_SHA256_H_
