#include "common/metrics/tfevents.h"

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "tensorboard/event.pb.h"
#include "tests/catch.h"
#include "tests/support/subprocess.h"

namespace convoy {
namespace {

using testing::MakeTempDir;
using testing::ReadWholeFile;

uint64_t LittleEndian(const std::string& bytes, size_t offset, size_t size) {
  uint64_t value = 0;
  for (size_t i = 0; i < size; ++i) {
    value |= uint64_t{static_cast<unsigned char>(bytes[offset + i])} << (8 * i);
  }
  return value;
}

void WriteWholeFile(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << contents;
}

std::unique_ptr<EventFileWriter> MustCreate(const std::string& dir) {
  absl::StatusOr<std::unique_ptr<EventFileWriter>> writer = EventFileWriter::Create(dir);
  REQUIRE(writer.ok());
  return *std::move(writer);
}

TEST_CASE("CRC32C of 123456789 is the standard check value E3069283") {
  CHECK(Crc32c("123456789") == 0xE3069283u);
  CHECK(Crc32c("") == 0u);
}

TEST_CASE("Unmasking a masked CRC gives the CRC back") {
  for (uint32_t crc : {0u, 1u, 0xE3069283u, 0xffffffffu, 0x12345678u}) {
    CHECK(UnmaskCrc32c(MaskCrc32c(crc)) == crc);
  }
  CHECK(MaskCrc32c(0) == 0xa282ead8u);
}

TEST_CASE("An event file is named events.out.tfevents with the time and the host name") {
  const std::string dir = MakeTempDir("tfevents");
  const int64_t before = absl::ToUnixSeconds(absl::Now());
  auto writer = MustCreate(dir + "/nested/run");
  const int64_t after = absl::ToUnixSeconds(absl::Now());
  char host[256] = {};
  REQUIRE(gethostname(host, sizeof(host) - 1) == 0);

  const std::string name = std::filesystem::path(writer->path()).filename();
  CHECK(std::filesystem::path(writer->path()).parent_path() == dir + "/nested/run");
  REQUIRE(absl::StartsWith(name, "events.out.tfevents."));
  const std::string rest = name.substr(std::string("events.out.tfevents.").size());
  const int64_t seconds = std::stoll(rest.substr(0, rest.find('.')));
  CHECK(seconds >= before);
  CHECK(seconds <= after);
  CHECK(rest.substr(rest.find('.') + 1) == host);
}

TEST_CASE("Two writers started in the same second in one directory write different files") {
  const std::string dir = MakeTempDir("tfevents");
  auto first = MustCreate(dir);
  auto second = MustCreate(dir);
  CHECK(first->path() != second->path());
  REQUIRE(first->AddScalar("a", 1, 1.0).ok());
  REQUIRE(second->AddScalar("b", 1, 2.0).ok());
  REQUIRE(first->Flush().ok());
  REQUIRE(second->Flush().ok());
  CHECK(ReadScalars(first->path())->at(0).tag == "a");
  CHECK(ReadScalars(second->path())->at(0).tag == "b");
}

TEST_CASE("The first record is TFRecord framed and carries file_version brain.Event:2") {
  const std::string dir = MakeTempDir("tfevents");
  auto writer = MustCreate(dir);
  const std::string bytes = ReadWholeFile(writer->path());
  REQUIRE(bytes.size() >= 16);

  const uint64_t length = LittleEndian(bytes, 0, 8);
  REQUIRE(bytes.size() == 8 + 4 + length + 4);
  CHECK(LittleEndian(bytes, 8, 4) == MaskCrc32c(Crc32c(bytes.substr(0, 8))));
  const std::string data = bytes.substr(12, length);
  CHECK(LittleEndian(bytes, 12 + length, 4) == MaskCrc32c(Crc32c(data)));

  tensorboard::Event event;
  REQUIRE(event.ParseFromString(data));
  CHECK(event.file_version() == "brain.Event:2");
  CHECK(event.wall_time() > 1.6e9);
}

TEST_CASE("Scalars read back in order with their tags steps values and wall times") {
  const std::string dir = MakeTempDir("tfevents");
  auto writer = MustCreate(dir);
  const absl::Time wall = absl::FromUnixMillis(1700000000250);
  REQUIRE(writer->AddScalar("episode/return", 3, 12.5, wall).ok());
  REQUIRE(writer->AddScalar("episode/return", 7, -0.25, wall + absl::Seconds(1)).ok());
  REQUIRE(writer->AddScalars(9, {{"loss", 0.125}, {"q", 4.0}}, wall + absl::Seconds(2)).ok());
  REQUIRE(writer->Flush().ok());

  absl::StatusOr<std::vector<ScalarEvent>> scalars = ReadScalars(writer->path());
  REQUIRE(scalars.ok());
  REQUIRE(scalars->size() == 4);
  CHECK((*scalars)[0].tag == "episode/return");
  CHECK((*scalars)[0].step == 3);
  CHECK((*scalars)[0].value == 12.5);
  CHECK((*scalars)[0].wall_time == wall);
  CHECK((*scalars)[1].step == 7);
  CHECK((*scalars)[1].value == -0.25);
  CHECK((*scalars)[2].tag == "loss");
  CHECK((*scalars)[3].tag == "q");
  CHECK((*scalars)[3].step == 9);
  CHECK((*scalars)[3].value == 4.0);
  CHECK((*scalars)[3].wall_time == wall + absl::Seconds(2));
}

TEST_CASE("A scalar keeps float precision as TensorBoard stores it") {
  const std::string dir = MakeTempDir("tfevents");
  auto writer = MustCreate(dir);
  REQUIRE(writer->AddScalar("x", 0, 0.1).ok());
  REQUIRE(writer->Flush().ok());
  CHECK(ReadScalars(writer->path())->at(0).value == static_cast<double>(0.1f));
}

TEST_CASE("A scalar with an empty tag is rejected") {
  const std::string dir = MakeTempDir("tfevents");
  auto writer = MustCreate(dir);
  CHECK(writer->AddScalar("", 0, 1.0).code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("Records written before a crash are readable after Flush") {
  const std::string dir = MakeTempDir("tfevents");
  auto writer = MustCreate(dir);
  REQUIRE(writer->AddScalar("x", 1, 1.0).ok());
  REQUIRE(writer->Flush().ok());
  // The writer is still open: what Flush returned for is already in the file.
  absl::StatusOr<std::vector<ScalarEvent>> scalars = ReadScalars(writer->path());
  REQUIRE(scalars.ok());
  CHECK(scalars->size() == 1);
}

TEST_CASE("A corrupt record makes reading fail with DATA_LOSS") {
  const std::string dir = MakeTempDir("tfevents");
  std::string path;
  {
    auto writer = MustCreate(dir);
    REQUIRE(writer->AddScalar("episode/return", 1, 10.0).ok());
    path = writer->path();
  }
  const std::string good = ReadWholeFile(path);
  const size_t second = 8 + 4 + LittleEndian(good, 0, 8) + 4;
  REQUIRE(good.size() > second + 16);
  REQUIRE(ReadScalars(path).ok());

  std::string bad = good;
  SECTION("a flipped bit in the data") { bad[second + 12 + 3] ^= 0x04; }
  SECTION("a flipped bit in the length") { bad[second] ^= 0x01; }
  SECTION("a flipped bit in the data CRC") { bad[bad.size() - 1] ^= 0x80; }
  SECTION("a record cut short") { bad.resize(bad.size() - 5); }
  SECTION("a header cut short") { bad.resize(second + 6); }
  WriteWholeFile(path, bad);
  CHECK(ReadScalars(path).status().code() == absl::StatusCode::kDataLoss);
}

TEST_CASE("Reading a missing event file fails with NOT_FOUND") {
  CHECK(ReadScalars(MakeTempDir("tfevents") + "/absent").status().code() ==
        absl::StatusCode::kNotFound);
}

TEST_CASE("Creating an event file in an empty directory name fails with INVALID_ARGUMENT") {
  CHECK(EventFileWriter::Create("").status().code() == absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace convoy
