#include "common/support/secret_file.h"

namespace convoy {

absl::Status WriteSecretFile(const std::string& path, absl::string_view contents) {
  absl::Status written = WriteFileAtomically(path, contents, kSecretFileMode);
  if (written.ok() || absl::IsPermissionDenied(written)) return written;
  return absl::PermissionDeniedError(written.message());
}

}  // namespace convoy
