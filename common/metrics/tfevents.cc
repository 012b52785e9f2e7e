#include "common/metrics/tfevents.h"

#include <isa-l/crc.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "common/support/files.h"
#include "common/support/status_macros.h"
#include "glog/logging.h"
#include "tensorboard/event.pb.h"

namespace convoy {
namespace {

constexpr char kFileVersion[] = "brain.Event:2";
constexpr uint32_t kCrcMaskDelta = 0xa282ead8u;
constexpr size_t kLengthBytes = sizeof(uint64_t);
constexpr size_t kCrcBytes = sizeof(uint32_t);
// Bounds the name search when several writers start in the same second on the same host.
constexpr int kMaxNameAttempts = 1000;

void PutLittleEndian(uint64_t value, size_t bytes, char* out) {
  for (size_t i = 0; i < bytes; ++i) out[i] = static_cast<char>((value >> (8 * i)) & 0xff);
}

uint64_t GetLittleEndian(const char* in, size_t bytes) {
  uint64_t value = 0;
  for (size_t i = 0; i < bytes; ++i)
    value |= uint64_t{static_cast<unsigned char>(in[i])} << (8 * i);
  return value;
}

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

}  // namespace

uint32_t Crc32c(std::string_view data) {
  // ISA-L's crc32_iscsi neither pre- nor post-inverts; the standard CRC32C does both.
  // crc32_iscsi takes a non-const pointer but only reads through it.
  auto* bytes = reinterpret_cast<unsigned char*>(const_cast<char*>(data.data()));
  return ~crc32_iscsi(bytes, static_cast<int>(data.size()), 0xffffffffu);
}

uint32_t MaskCrc32c(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + kCrcMaskDelta; }

uint32_t UnmaskCrc32c(uint32_t masked) {
  const uint32_t rotated = masked - kCrcMaskDelta;
  return (rotated >> 17) | (rotated << 15);
}

absl::StatusOr<std::unique_ptr<EventFileWriter>> EventFileWriter::Create(const std::string& dir) {
  if (dir.empty()) return absl::InvalidArgumentError("EventFileWriter: empty directory");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return ErrnoError(ec.value(), "cannot create directory", dir);

  const std::string base =
      absl::StrCat(dir, "/events.out.tfevents.", absl::ToUnixSeconds(absl::Now()), ".", HostName());
  std::FILE* file = nullptr;
  std::string path;
  for (int attempt = 0; attempt < kMaxNameAttempts && file == nullptr; ++attempt) {
    path = attempt == 0 ? base : absl::StrCat(base, ".", attempt);
    // "x": fail rather than truncate a file another writer owns.
    file = std::fopen(path.c_str(), "wbx");
    if (file == nullptr && errno != EEXIST) return ErrnoError(errno, "cannot create", path);
  }
  if (file == nullptr)
    return absl::AlreadyExistsError(absl::StrCat("no free event file name for ", base));

  std::unique_ptr<EventFileWriter> writer(new EventFileWriter(path, file));
  tensorboard::Event event;
  event.set_wall_time(absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()));
  event.set_file_version(kFileVersion);
  {
    absl::MutexLock lock(&writer->mu_);
    absl::Status status = writer->WriteRecord(event.SerializeAsString());
    if (!status.ok()) return status;
  }
  absl::Status status = writer->Flush();
  if (!status.ok()) return status;
  return writer;
}

EventFileWriter::~EventFileWriter() {
  absl::MutexLock lock(&mu_);
  if (std::fclose(file_) != 0) {
    LOG(ERROR) << "closing " << path_ << ": " << std::strerror(errno);
  }
}

absl::Status EventFileWriter::AddScalar(std::string_view tag, int64_t step, double value,
                                        absl::Time wall) {
  return AddScalars(step, {{std::string(tag), value}}, wall);
}

absl::Status EventFileWriter::AddScalars(int64_t step,
                                         const std::vector<std::pair<std::string, double>>& values,
                                         absl::Time wall) {
  tensorboard::Event event;
  event.set_wall_time(absl::ToDoubleSeconds(wall - absl::UnixEpoch()));
  event.set_step(step);
  tensorboard::Summary* summary = event.mutable_summary();
  for (const auto& [tag, value] : values) {
    if (tag.empty()) return absl::InvalidArgumentError("EventFileWriter: empty tag");
    tensorboard::Summary::Value* entry = summary->add_value();
    entry->set_tag(tag);
    entry->set_simple_value(static_cast<float>(value));
  }
  const std::string data = event.SerializeAsString();
  absl::MutexLock lock(&mu_);
  return WriteRecord(data);
}

absl::Status EventFileWriter::AddImage(std::string_view tag, int64_t step, std::string_view encoded,
                                       int width, int height, absl::Time wall) {
  if (tag.empty()) return absl::InvalidArgumentError("EventFileWriter: empty tag");
  tensorboard::Event event;
  event.set_wall_time(absl::ToDoubleSeconds(wall - absl::UnixEpoch()));
  event.set_step(step);
  tensorboard::Summary::Value* entry = event.mutable_summary()->add_value();
  entry->set_tag(std::string(tag));
  tensorboard::Summary::Image* image = entry->mutable_image();
  image->set_width(width);
  image->set_height(height);
  image->set_colorspace(3);
  image->set_encoded_image_string(std::string(encoded));
  const std::string data = event.SerializeAsString();
  absl::MutexLock lock(&mu_);
  return WriteRecord(data);
}

absl::Status EventFileWriter::Flush() {
  absl::MutexLock lock(&mu_);
  if (std::fflush(file_) != 0) return ErrnoError(errno, "cannot flush", path_);
  return absl::OkStatus();
}

absl::Status EventFileWriter::WriteRecord(std::string_view data) {
  char header[kLengthBytes + kCrcBytes];
  PutLittleEndian(data.size(), kLengthBytes, header);
  PutLittleEndian(MaskCrc32c(Crc32c(std::string_view(header, kLengthBytes))), kCrcBytes,
                  header + kLengthBytes);
  char footer[kCrcBytes];
  PutLittleEndian(MaskCrc32c(Crc32c(data)), kCrcBytes, footer);
  if (std::fwrite(header, 1, sizeof(header), file_) != sizeof(header) ||
      std::fwrite(data.data(), 1, data.size(), file_) != data.size() ||
      std::fwrite(footer, 1, sizeof(footer), file_) != sizeof(footer)) {
    return ErrnoError(errno, "cannot write", path_);
  }
  return absl::OkStatus();
}

namespace {
// Calls `on_event` on every event of the file at `path`, verifying each record's CRCs.
absl::Status ForEachEvent(const std::string& path,
                          const std::function<void(const tensorboard::Event&)>& on_event) {
  CONVOY_ASSIGN_OR_RETURN(std::string read, ReadFileToString(path));
  const std::string& contents = read;

  size_t offset = 0;
  while (offset < contents.size()) {
    const std::string_view rest = std::string_view(contents).substr(offset);
    if (rest.size() < kLengthBytes + kCrcBytes) {
      return absl::DataLossError(absl::StrCat(path, ": truncated record header at byte ", offset));
    }
    const uint64_t length = GetLittleEndian(rest.data(), kLengthBytes);
    const uint32_t length_crc =
        UnmaskCrc32c(static_cast<uint32_t>(GetLittleEndian(rest.data() + kLengthBytes, kCrcBytes)));
    if (length_crc != Crc32c(rest.substr(0, kLengthBytes))) {
      return absl::DataLossError(absl::StrCat(path, ": length CRC mismatch at byte ", offset));
    }
    if (length > rest.size() - kLengthBytes - 2 * kCrcBytes) {
      return absl::DataLossError(absl::StrCat(path, ": truncated record at byte ", offset));
    }
    const std::string_view data = rest.substr(kLengthBytes + kCrcBytes, length);
    const uint32_t data_crc = UnmaskCrc32c(static_cast<uint32_t>(
        GetLittleEndian(rest.data() + kLengthBytes + kCrcBytes + length, kCrcBytes)));
    if (data_crc != Crc32c(data)) {
      return absl::DataLossError(absl::StrCat(path, ": data CRC mismatch at byte ", offset));
    }
    tensorboard::Event event;
    if (!event.ParseFromArray(data.data(), static_cast<int>(data.size()))) {
      return absl::DataLossError(absl::StrCat(path, ": unparsable event at byte ", offset));
    }
    on_event(event);
    offset += kLengthBytes + 2 * kCrcBytes + length;
  }
  return absl::OkStatus();
}
}  // namespace

absl::StatusOr<std::vector<ScalarEvent>> ReadScalars(const std::string& path) {
  std::vector<ScalarEvent> scalars;
  CONVOY_RETURN_IF_ERROR(ForEachEvent(path, [&](const tensorboard::Event& event) {
    // A double holds today's Unix time to about 0.2 us; microseconds round-trip what was written.
    const absl::Time wall = absl::FromUnixMicros(std::llround(event.wall_time() * 1e6));
    for (const tensorboard::Summary::Value& value : event.summary().value()) {
      if (!value.has_simple_value()) continue;
      scalars.push_back({value.tag(), event.step(), value.simple_value(), wall});
    }
  }));
  return scalars;
}

absl::StatusOr<std::vector<ImageEvent>> ReadImages(const std::string& path) {
  std::vector<ImageEvent> images;
  CONVOY_RETURN_IF_ERROR(ForEachEvent(path, [&](const tensorboard::Event& event) {
    for (const tensorboard::Summary::Value& value : event.summary().value()) {
      if (!value.has_image()) continue;
      const tensorboard::Summary::Image& image = value.image();
      images.push_back(
          {value.tag(), event.step(), image.width(), image.height(), image.encoded_image_string()});
    }
  }));
  return images;
}

}  // namespace convoy
