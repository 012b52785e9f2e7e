// TensorBoard event files: scalar and image summaries in TFRecord framing, readable by a stock
// TensorBoard.
//
// A file is a sequence of records, each
//   uint64 length (little-endian) | uint32 masked CRC32C of the 8 length bytes | data | uint32
//   masked CRC32C of the data
// where data is a serialized tensorboard.Event (proto/tensorboard/event.proto). The first record
// carries file_version "brain.Event:2"; every later one a Summary of simple_value scalars or of one
// encoded image.
#ifndef CONVOY_COMMON_METRICS_TFEVENTS_H_
#define CONVOY_COMMON_METRICS_TFEVENTS_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace convoy {

// CRC32C (Castagnoli, reflected, initial and final value all ones): Crc32c("123456789") ==
// 0xE3069283.
uint32_t Crc32c(std::string_view data);

// TFRecord stores CRCs masked, because a CRC computed over data that itself holds CRCs is weak.
uint32_t MaskCrc32c(uint32_t crc);
uint32_t UnmaskCrc32c(uint32_t masked);

// One scalar as read back from an event file.
struct ScalarEvent {
  std::string tag;
  int64_t step = 0;
  // TensorBoard stores simple_value as a float: a double written comes back rounded to float
  // precision.
  double value = 0.0;
  // To the microsecond.
  absl::Time wall_time;
};

// One image as read back from an event file.
struct ImageEvent {
  std::string tag;
  int64_t step = 0;
  int width = 0;
  int height = 0;
  std::string encoded;  // PNG or GIF bytes
};

// Writes one event file in a directory. Thread-safe: calls from several threads are serialised.
// Records are buffered by stdio; Flush() (and the destructor) hands them to the operating system.
class EventFileWriter {
 public:
  // Creates `dir` (and its parents) if missing and a new file in it named
  // events.out.tfevents.<unix_seconds>.<hostname>, with ".<n>" appended if a file of that name
  // already exists, then writes the file_version record. Errors: INVALID_ARGUMENT for an empty dir,
  // or the I/O error.
  static absl::StatusOr<std::unique_ptr<EventFileWriter>> Create(const std::string& dir);

  // Flushes and closes the file; errors are logged, not returned.
  ~EventFileWriter();

  EventFileWriter(const EventFileWriter&) = delete;
  EventFileWriter& operator=(const EventFileWriter&) = delete;

  // Appends one event with one scalar. Errors: INVALID_ARGUMENT for an empty tag, or the I/O error.
  absl::Status AddScalar(std::string_view tag, int64_t step, double value,
                         absl::Time wall = absl::Now());

  // Appends one event with several scalars of the same step (one record, as TensorBoard's own
  // writers do for a merged summary). Errors as AddScalar.
  absl::Status AddScalars(int64_t step, const std::vector<std::pair<std::string, double>>& values,
                          absl::Time wall = absl::Now());

  // Appends one event with one encoded RGB image (PNG, or an animated GIF that TensorBoard plays)
  // of width x height pixels. Errors as AddScalar.
  absl::Status AddImage(std::string_view tag, int64_t step, std::string_view encoded, int width,
                        int height, absl::Time wall = absl::Now());

  // Hands buffered records to the operating system, so they survive a crash of this process.
  absl::Status Flush();

  // The full path of the file being written.
  const std::string& path() const { return path_; }

 private:
  EventFileWriter(std::string path, std::FILE* file) : path_(std::move(path)), file_(file) {}

  absl::Status WriteRecord(std::string_view data) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  absl::Mutex mu_;
  std::FILE* file_ ABSL_GUARDED_BY(mu_);
};

// Reads every scalar of an event file in order (records without a summary, such as the file_version
// one, are skipped). Verifies both CRCs of every record. Errors: NOT_FOUND if the file cannot be
// opened; DATA_LOSS on a CRC mismatch, a truncated record or an unparsable event.
absl::StatusOr<std::vector<ScalarEvent>> ReadScalars(const std::string& path);
// Reads every image of an event file in order, verified as ReadScalars does. Errors as ReadScalars.
absl::StatusOr<std::vector<ImageEvent>> ReadImages(const std::string& path);

}  // namespace convoy

#endif  // CONVOY_COMMON_METRICS_TFEVENTS_H_
