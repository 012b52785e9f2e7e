// Files: whole-file reads, errno as a status, and writes that survive a crash — a file is either the old
// one or the whole new one, and once a write returns OK its bytes and its name are on the disk.
#ifndef CONVOY_COMMON_SUPPORT_FILES_H_
#define CONVOY_COMMON_SUPPORT_FILES_H_

#include <sys/types.h>

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace convoy {

// "<what> <path>: <strerror(error)>" with the code absl gives `error` (ENOSPC and EDQUOT:
// RESOURCE_EXHAUSTED; EACCES and EPERM: PERMISSION_DENIED; ENOENT: NOT_FOUND; ...), except that EROFS is
// PERMISSION_DENIED (nothing may be written there, as for EACCES) and an errno absl does not map is INTERNAL.
absl::Status ErrnoError(int error, absl::string_view what, absl::string_view path);

// The bytes of `path`. Errors: NOT_FOUND "cannot open <path>: ..." when it cannot be opened (the errno
// says why), ErrnoError's code when it cannot be read.
absl::StatusOr<std::string> ReadFileToString(const std::string& path);

// Creates `path`, which must not exist (not even as a dangling symbolic link), with exactly `mode`
// (whatever the umask), and returns its descriptor (write-only, close-on-exec; the caller closes it).
// Nothing existing is ever opened or followed. Errors: ALREADY_EXISTS when something is at `path`;
// ErrnoError's code naming `path` otherwise.
absl::StatusOr<int> CreateExclusiveFile(const std::string& path, mode_t mode);

// Writes all of `contents` to the descriptor, retrying short writes and EINTR. Errors: ErrnoError's code
// naming `path`.
absl::Status WriteAll(int fd, absl::string_view contents, absl::string_view path);

// Whether a write waits for the disk: kDurable fsyncs the file (and, after a rename, its directory), so a
// crash right after the write returns keeps it; kAtomicOnly still never shows a partial file, but a crash
// may lose the newest write (frame dumps and other output that is cheap to make again).
enum class Durability { kDurable, kAtomicOnly };

// Creates `path` (it must not exist) with `mode`, writes `contents` and fsyncs the file. For a file inside a
// directory that is itself made durable later (a checkpoint's temporary directory, renamed into place and
// then FsyncDirectory-ed). Errors: as CreateExclusiveFile and WriteAll.
absl::Status WriteNewFileDurably(const std::string& path, absl::string_view contents, mode_t mode);

// fsyncs the directory `path`, so that the names created, renamed or removed in it are on the disk.
absl::Status FsyncDirectory(const std::string& path);

// Replaces `path` with `contents` all at once: into a temporary file beside it, created by
// CreateExclusiveFile with `mode` (first <path>.tmp, then <path>.tmp-<random> when that name is taken —
// an existing name is never opened, followed or removed), fsynced, renamed over `path`, and the directory
// fsynced (kAtomicOnly: neither fsync). A reader sees the old file or the whole new one, and the file never
// has another mode. On an error the temporary file is removed. Errors: ErrnoError's code, the message
// naming `path`.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents, mode_t mode,
                                 Durability durability = Durability::kDurable);
// WriteFileAtomically for contents too large to hold whole: `write` writes them to the temporary
// file, open as `fd` and named `temp` (for its errors), piece by piece.
absl::Status WriteFileAtomicallyWith(
    const std::string& path, mode_t mode,
    const std::function<absl::Status(int fd, const std::string& temp)>& write,
    Durability durability = Durability::kDurable);

}  // namespace convoy

#endif  // CONVOY_COMMON_SUPPORT_FILES_H_
