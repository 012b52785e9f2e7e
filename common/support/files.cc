#include "common/support/files.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/support/status_macros.h"

namespace convoy {
namespace {

// Temporary names tried before giving up: the first is <path>.tmp, the rest random.
constexpr int kTemporaryNameAttempts = 16;

std::string ParentDirectory(const std::string& path) {
  const std::string parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

}  // namespace

absl::Status ErrnoError(int error, absl::string_view what, absl::string_view path) {
  absl::StatusCode code = absl::ErrnoToStatusCode(error);
  if (error == EROFS) code = absl::StatusCode::kPermissionDenied;
  if (code == absl::StatusCode::kUnknown) code = absl::StatusCode::kInternal;
  return absl::Status(code, absl::StrCat(what, " ", path, ": ", std::strerror(error)));
}

absl::StatusOr<std::string> ReadFileToString(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::NotFoundError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  std::string contents;
  char buffer[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      absl::Status error = ErrnoError(errno, "cannot read", path);
      ::close(fd);
      return error;
    }
    if (n == 0) break;
    contents.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return contents;
}

absl::StatusOr<int> CreateExclusiveFile(const std::string& path, mode_t mode) {
  // O_EXCL with O_CREAT fails on any existing name, a symbolic link included, so nothing is followed.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) {
    const int error = errno;
    if (error == EEXIST) return absl::AlreadyExistsError(absl::StrCat(path, " already exists"));
    return ErrnoError(error, "cannot create", path);
  }
  // The umask can only have taken bits away; this sets exactly `mode` before any byte is written.
  if (::fchmod(fd, mode) != 0) {
    const int error = errno;
    ::close(fd);
    ::unlink(path.c_str());
    return ErrnoError(error, "cannot set the mode of", path);
  }
  return fd;
}

absl::Status WriteAll(int fd, absl::string_view contents, absl::string_view path) {
  while (!contents.empty()) {
    const ssize_t n = ::write(fd, contents.data(), contents.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError(errno, "cannot write", path);
    if (n == 0) return ErrnoError(EIO, "cannot write", path);
    contents.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

namespace {

using FileWriter = std::function<absl::Status(int fd, const std::string& path)>;

absl::Status WriteNewFile(const std::string& path, const FileWriter& write, mode_t mode,
                          Durability durability) {
  CONVOY_ASSIGN_OR_RETURN(int fd, CreateExclusiveFile(path, mode));
  absl::Status written = write(fd, path);
  if (written.ok() && durability == Durability::kDurable && ::fsync(fd) != 0) {
    written = ErrnoError(errno, "cannot fsync", path);
  }
  if (::close(fd) != 0 && written.ok()) written = ErrnoError(errno, "cannot close", path);
  return written;
}

// A writer of `contents`, whole.
FileWriter WriterOf(absl::string_view contents) {
  return [contents](int fd, const std::string& path) { return WriteAll(fd, contents, path); };
}

}  // namespace

absl::Status WriteNewFileDurably(const std::string& path, absl::string_view contents, mode_t mode) {
  return WriteNewFile(path, WriterOf(contents), mode, Durability::kDurable);
}

absl::Status FsyncDirectory(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, "cannot open directory", path);
  const int rc = ::fsync(fd);
  const int error = errno;
  ::close(fd);
  if (rc != 0) return ErrnoError(error, "cannot fsync directory", path);
  return absl::OkStatus();
}

absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents, mode_t mode,
                                 Durability durability) {
  return WriteFileAtomicallyWith(path, mode, WriterOf(contents), durability);
}

absl::Status WriteFileAtomicallyWith(const std::string& path, mode_t mode, const FileWriter& write,
                                     Durability durability) {
  absl::BitGen random;
  std::string temp = path + ".tmp";
  absl::Status written = WriteNewFile(temp, write, mode, durability);
  for (int attempt = 1; attempt < kTemporaryNameAttempts && absl::IsAlreadyExists(written);
       ++attempt) {
    temp = absl::StrFormat("%s.tmp-%016x", path, absl::Uniform<uint64_t>(random));
    written = WriteNewFile(temp, write, mode, durability);
  }
  if (absl::IsAlreadyExists(written)) {
    return absl::Status(written.code(), absl::StrCat("cannot write ", path, ": ", written.message()));
  }
  bool renamed = false;
  if (written.ok()) {
    renamed = std::rename(temp.c_str(), path.c_str()) == 0;
    if (!renamed) written = ErrnoError(errno, "cannot rename", absl::StrCat(temp, " to ", path));
  }
  if (written.ok() && durability == Durability::kDurable) {
    written = FsyncDirectory(ParentDirectory(path));
  }
  if (!written.ok()) {
    if (!renamed) ::unlink(temp.c_str());
    return absl::Status(written.code(), absl::StrCat("cannot write ", path, ": ", written.message()));
  }
  return absl::OkStatus();
}

}  // namespace convoy
