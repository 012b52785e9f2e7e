// Files that must never be readable by others — private keys, bearer tokens — created with their
// final mode from the first byte (common/support/files.h: opened O_CREAT|O_EXCL with the mode and fchmod-ed to
// it, whatever the umask), never chmod-ed after the fact, never through a symbolic link or a file
// someone else made.
#ifndef CONVOY_COMMON_SUPPORT_SECRET_FILE_H_
#define CONVOY_COMMON_SUPPORT_SECRET_FILE_H_

#include <sys/types.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/support/files.h"

namespace convoy {

inline constexpr mode_t kSecretFileMode = 0600;

// WriteFileAtomically with mode 0600: owner read and write only. Errors: PERMISSION_DENIED naming
// `path`, whatever the cause — a secret that cannot be written is the caller's to fix where it lives.
absl::Status WriteSecretFile(const std::string& path, absl::string_view contents);

}  // namespace convoy

#endif  // CONVOY_COMMON_SUPPORT_SECRET_FILE_H_
