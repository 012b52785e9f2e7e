// Files that must never be readable by others — private keys, bearer tokens — created with their
// final mode from the first byte: opened O_CREAT|O_EXCL with the mode (and fchmod-ed to it,
// whatever the umask), never chmod-ed after the fact, never through a symbolic link or a file
// someone else made.
#ifndef CONVOY_COMMON_SECRET_FILE_H_
#define CONVOY_COMMON_SECRET_FILE_H_

#include <sys/types.h>

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace convoy {

inline constexpr mode_t kSecretFileMode = 0600;

// Creates `path`, which must not exist (not even as a dangling symbolic link), with exactly `mode`,
// and returns its descriptor (write-only, close-on-exec; the caller closes it). Errors:
// ALREADY_EXISTS when something is at `path`; PERMISSION_DENIED naming `path` otherwise.
absl::StatusOr<int> CreateExclusiveFile(const std::string& path, mode_t mode);

// Writes `contents` to `path` all at once: into a temporary file beside it, created by
// CreateExclusiveFile with `mode` (first <path>.tmp, then <path>.tmp-<random> when that name is
// taken — an existing name is never opened, followed or removed), then renamed over `path`. A
// reader sees the old file or the whole new one, and the file never has another mode. Errors:
// PERMISSION_DENIED naming `path`.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents, mode_t mode);

// WriteFileAtomically with mode 0600: owner read and write only.
absl::Status WriteSecretFile(const std::string& path, absl::string_view contents);

}  // namespace convoy

#endif  // CONVOY_COMMON_SECRET_FILE_H_
