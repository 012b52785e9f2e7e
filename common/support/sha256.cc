#include "common/support/sha256.h"

#include <openssl/evp.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace convoy {
namespace {

std::string Hex(const std::array<uint8_t, 32>& digest) {
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest.data()), digest.size()));
}

}  // namespace

std::string Sha256Hex(absl::string_view data) {
  Sha256Stream digest;
  digest.Update(data.data(), data.size());
  return Hex(digest.Finish());
}

absl::StatusOr<FileDigest> Sha256OfFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  Sha256Stream digest;
  std::vector<char> buffer(1 << 20);
  FileDigest result;
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    const std::streamsize got = in.gcount();
    if (got <= 0) break;
    digest.Update(buffer.data(), static_cast<size_t>(got));
    result.size += static_cast<uint64_t>(got);
  }
  if (in.bad()) return absl::InternalError(absl::StrCat("error reading ", path));
  result.sha256 = Hex(digest.Finish());
  return result;
}

Sha256Stream::Sha256Stream() : ctx_(EVP_MD_CTX_new()) {
  EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr);
}

Sha256Stream::~Sha256Stream() { EVP_MD_CTX_free(ctx_); }

void Sha256Stream::Update(const void* data, size_t n) { EVP_DigestUpdate(ctx_, data, n); }

std::array<uint8_t, 32> Sha256Stream::Finish() {
  std::array<uint8_t, 32> digest{};
  unsigned int length = 0;
  EVP_DigestFinal_ex(ctx_, digest.data(), &length);
  return digest;
}

}  // namespace convoy
