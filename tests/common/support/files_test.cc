#include "common/support/files.h"

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/wire/grpc_status.h"
#include "tests/catch.h"
#include "tests/support/subprocess.h"

namespace convoy {
namespace {

namespace fs = std::filesystem;
using testing::MakeTempDir;

mode_t ModeOf(const std::string& path) {
  struct stat st = {};
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

size_t EntriesIn(const std::string& dir) {
  return static_cast<size_t>(std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
}

TEST_CASE("ErrnoError names what failed and where, with the code of the errno", "[files]") {
  const absl::Status full = ErrnoError(ENOSPC, "cannot write", "/data/x");
  CHECK(absl::IsResourceExhausted(full));
  CHECK(full.message() == absl::StrCat("cannot write /data/x: ", std::strerror(ENOSPC)));
  CHECK(absl::IsResourceExhausted(ErrnoError(EDQUOT, "cannot write", "/q")));
  CHECK(absl::IsPermissionDenied(ErrnoError(EACCES, "cannot create", "/p")));
  CHECK(absl::IsPermissionDenied(ErrnoError(EROFS, "cannot create", "/ro")));
  CHECK(absl::IsNotFound(ErrnoError(ENOENT, "cannot open", "/missing")));
  // An errno with no canonical meaning is an internal error, never UNKNOWN or OK.
  CHECK(absl::IsInternal(ErrnoError(4095, "cannot frob", "/f")));
}

TEST_CASE("A whole file reads back byte for byte, and a missing one is NOT_FOUND naming it",
          "[files]") {
  const std::string dir = MakeTempDir("convoy_files");
  const std::string bytes = std::string("a\0b\r\n", 5) + std::string(200000, 'z');
  {
    std::ofstream out(dir + "/f", std::ios::binary);
    out << bytes;
  }
  absl::StatusOr<std::string> read = ReadFileToString(dir + "/f");
  REQUIRE(read.ok());
  CHECK(*read == bytes);
  CHECK(ReadFileToString(dir + "/empty").status().code() == absl::StatusCode::kNotFound);
  CHECK(absl::StrContains(ReadFileToString(dir + "/empty").status().message(), dir + "/empty"));
  // A directory opens but cannot be read: that is an error, not an empty file.
  CHECK(!ReadFileToString(dir).ok());
}

TEST_CASE("An atomic write replaces the file whole, with its mode, and leaves no temporary",
          "[files]") {
  const std::string dir = MakeTempDir("convoy_files");
  const mode_t previous = ::umask(0077);
  REQUIRE(WriteFileAtomically(dir + "/w", "first", 0644).ok());
  REQUIRE(WriteFileAtomically(dir + "/w", "second", 0644).ok());
  ::umask(previous);
  CHECK(testing::ReadWholeFile(dir + "/w") == "second");
  CHECK(ModeOf(dir + "/w") == 0644);  // Exactly the mode asked for, whatever the umask.
  CHECK(EntriesIn(dir) == 1);
  // Without waiting for the disk, the replacement is just as whole.
  REQUIRE(WriteFileAtomically(dir + "/w", "third", 0600, Durability::kAtomicOnly).ok());
  CHECK(testing::ReadWholeFile(dir + "/w") == "third");
  CHECK(ModeOf(dir + "/w") == 0600);
  CHECK(EntriesIn(dir) == 1);
}

TEST_CASE("An atomic write never follows or removes what sits at its temporary name", "[files]") {
  const std::string dir = MakeTempDir("convoy_files");
  const std::string target = dir + "/elsewhere";
  fs::create_symlink(target, dir + "/w.tmp");
  REQUIRE(WriteFileAtomically(dir + "/w", "data", 0600).ok());
  CHECK(!fs::exists(target));
  CHECK(fs::is_symlink(dir + "/w.tmp"));
  CHECK(testing::ReadWholeFile(dir + "/w") == "data");
}

TEST_CASE("A write into a missing directory fails naming the file and leaves nothing", "[files]") {
  const std::string dir = MakeTempDir("convoy_files");
  const absl::Status s = WriteFileAtomically(dir + "/no/such/file", "x", 0644);
  CHECK(absl::IsNotFound(s));
  CHECK(absl::StrContains(s.message(), dir + "/no/such/file"));
  CHECK(EntriesIn(dir) == 0);
  CHECK(absl::IsNotFound(FsyncDirectory(dir + "/no")));
}

TEST_CASE("A new durable file refuses a name that exists and keeps what is there", "[files]") {
  const std::string dir = MakeTempDir("convoy_files");
  REQUIRE(WriteNewFileDurably(dir + "/n", "one", 0644).ok());
  const absl::Status again = WriteNewFileDurably(dir + "/n", "two", 0644);
  CHECK(absl::IsAlreadyExists(again));
  CHECK(testing::ReadWholeFile(dir + "/n") == "one");
  CHECK(FsyncDirectory(dir).ok());
}

TEST_CASE("Statuses cross the wire with their code and message, both ways", "[grpc_status]") {
  for (absl::StatusCode code :
       {absl::StatusCode::kInvalidArgument, absl::StatusCode::kFailedPrecondition,
        absl::StatusCode::kUnavailable, absl::StatusCode::kUnauthenticated,
        absl::StatusCode::kResourceExhausted, absl::StatusCode::kAborted}) {
    const absl::Status original(code, "what was wrong");
    const grpc::Status wire = ToGrpcStatus(original);
    CHECK(static_cast<int>(wire.error_code()) == static_cast<int>(code));
    CHECK(wire.error_message() == "what was wrong");
    CHECK(FromGrpcStatus(wire) == original);
  }
  CHECK(ToGrpcStatus(absl::OkStatus()).ok());
  CHECK(FromGrpcStatus(grpc::Status::OK).ok());
}

}  // namespace
}  // namespace convoy
