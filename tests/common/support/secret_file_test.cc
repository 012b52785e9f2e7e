#include "common/support/secret_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "common/wire/security.h"
#include "tests/catch.h"
#include "tests/support/subprocess.h"

namespace convoy {
namespace {

namespace fs = std::filesystem;
using testing::MakeTempDir;
using testing::ReadWholeFile;

// Sets a umask for one test and restores the previous one.
class ScopedUmask {
 public:
  explicit ScopedUmask(mode_t mask) : previous_(::umask(mask)) {}
  ~ScopedUmask() { ::umask(previous_); }

 private:
  mode_t previous_;
};

mode_t ModeOf(const std::string& path) {
  struct stat st = {};
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

TEST_CASE("A secret file has mode 0600 before its first byte, whatever the umask",
          "[secret_file]") {
  const std::string dir = MakeTempDir("convoy_secret");
  for (mode_t mask : {mode_t{0}, mode_t{022}, mode_t{0277}}) {
    ScopedUmask umask(mask);
    const std::string path = dir + "/created-" + std::to_string(mask);
    absl::StatusOr<int> fd = CreateExclusiveFile(path, kSecretFileMode);
    REQUIRE(fd.ok());
    struct stat st = {};
    REQUIRE(::fstat(*fd, &st) == 0);
    CHECK(st.st_size == 0);
    CHECK((st.st_mode & 07777) == 0600);
    ::close(*fd);
  }
}

TEST_CASE("A secret file is written whole with mode 0600 under umask 0", "[secret_file]") {
  ScopedUmask umask(0);
  const std::string dir = MakeTempDir("convoy_secret");
  const std::string path = dir + "/token";
  REQUIRE(WriteSecretFile(path, "s3cret\n").ok());
  CHECK(ModeOf(path) == 0600);
  CHECK(ReadWholeFile(path) == "s3cret\n");
  // Replacing it keeps the mode and leaves no temporary file behind.
  REQUIRE(WriteSecretFile(path, "other\n").ok());
  CHECK(ModeOf(path) == 0600);
  CHECK(ReadWholeFile(path) == "other\n");
  CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator()) == 1);
}

TEST_CASE("An existing name is never opened or followed", "[secret_file]") {
  const std::string dir = MakeTempDir("convoy_secret");
  const std::string target = dir + "/elsewhere";
  fs::create_symlink(target, dir + "/planted");
  absl::StatusOr<int> fd = CreateExclusiveFile(dir + "/planted", kSecretFileMode);
  CHECK(absl::IsAlreadyExists(fd.status()));
  CHECK(!fs::exists(target));

  // A link planted at the first temporary name makes the writer take another name; the link and
  // its target stay untouched.
  fs::create_symlink(target, dir + "/token.tmp");
  REQUIRE(WriteSecretFile(dir + "/token", "s3cret\n").ok());
  CHECK(!fs::exists(target));
  CHECK(fs::is_symlink(dir + "/token.tmp"));
  CHECK(ReadWholeFile(dir + "/token") == "s3cret\n");
  CHECK(ModeOf(dir + "/token") == 0600);
}

TEST_CASE("A file the writer cannot create is PERMISSION_DENIED naming it", "[secret_file]") {
  const absl::Status s = WriteSecretFile("/nonexistent-dir/token", "x");
  CHECK(absl::IsPermissionDenied(s));
  CHECK(s.message().find("/nonexistent-dir/token") != absl::string_view::npos);
}

TEST_CASE("Credential writers create their keys and tokens 0600 under umask 0", "[secret_file]") {
  ScopedUmask umask(0);
  const std::string dir = MakeTempDir("convoy_secret");
  REQUIRE(WriteClusterCredentials(dir + "/creds", "convoy-ps", 1).ok());
  CHECK(ModeOf(dir + "/creds/tls.key") == 0600);
  CHECK(ModeOf(dir + "/creds/auth_token") == 0600);
  CHECK(ModeOf(dir + "/creds/tls.crt") == 0644);
  REQUIRE(WriteSelfSignedCertificate(dir + "/cert.pem", dir + "/key.pem").ok());
  CHECK(ModeOf(dir + "/key.pem") == 0600);
  CHECK(ModeOf(dir + "/cert.pem") == 0644);
  CHECK(ReadWholeFile(dir + "/key.pem").rfind("-----BEGIN PRIVATE KEY-----", 0) == 0);
}

}  // namespace
}  // namespace convoy
