#include "common/secret_file.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace convoy {
namespace {

// Temporary names tried before giving up: the first is <path>.tmp, the rest random.
constexpr int kTemporaryNameAttempts = 16;

absl::Status WriteAll(int fd, absl::string_view contents) {
  while (!contents.empty()) {
    const ssize_t n = ::write(fd, contents.data(), contents.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return absl::ErrnoToStatus(errno, "write");
    contents.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<int> CreateExclusiveFile(const std::string& path, mode_t mode) {
  // O_EXCL with O_CREAT fails on any existing name, a symbolic link included, so nothing is
  // followed.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) {
    const int error = errno;
    if (error == EEXIST) return absl::AlreadyExistsError(absl::StrCat(path, " already exists"));
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create ", path, ": ", std::strerror(error)));
  }
  // The umask can only have taken bits away; this sets exactly `mode` before any byte is written.
  if (::fchmod(fd, mode) != 0) {
    const int error = errno;
    ::close(fd);
    ::unlink(path.c_str());
    return absl::PermissionDeniedError(
        absl::StrCat("cannot set the mode of ", path, ": ", std::strerror(error)));
  }
  return fd;
}

absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents, mode_t mode) {
  absl::BitGen random;
  std::string temp = path + ".tmp";
  absl::StatusOr<int> fd = CreateExclusiveFile(temp, mode);
  for (int attempt = 1; attempt < kTemporaryNameAttempts && absl::IsAlreadyExists(fd.status());
       ++attempt) {
    temp = absl::StrFormat("%s.tmp-%016x", path, absl::Uniform<uint64_t>(random));
    fd = CreateExclusiveFile(temp, mode);
  }
  if (!fd.ok()) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot write ", path, ": ", fd.status().message()));
  }
  absl::Status written = WriteAll(*fd, contents);
  if (written.ok() && ::fsync(*fd) != 0) written = absl::ErrnoToStatus(errno, "fsync");
  if (::close(*fd) != 0 && written.ok()) written = absl::ErrnoToStatus(errno, "close");
  if (written.ok() && std::rename(temp.c_str(), path.c_str()) != 0) {
    written = absl::ErrnoToStatus(errno, "rename");
  }
  if (!written.ok()) {
    ::unlink(temp.c_str());
    return absl::PermissionDeniedError(
        absl::StrCat("cannot write ", path, ": ", written.message()));
  }
  return absl::OkStatus();
}

absl::Status WriteSecretFile(const std::string& path, absl::string_view contents) {
  return WriteFileAtomically(path, contents, kSecretFileMode);
}

}  // namespace convoy
