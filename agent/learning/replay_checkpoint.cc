#include "agent/learning/replay_checkpoint.h"

#include <fcntl.h>
#include <glog/logging.h>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/message.h>
#include <isa-l/igzip_lib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "common/support/files.h"
#include "common/support/sha256.h"
#include "common/support/status_macros.h"

namespace convoy::agent {
namespace {

using google::protobuf::io::CodedInputStream;
using google::protobuf::io::CodedOutputStream;

constexpr char kMagic[] = "CONVOYRM";
constexpr size_t kMagicBytes = sizeof(kMagic) - 1;
constexpr size_t kPrefixBytes = kMagicBytes + 4;  // The magic and the format, little-endian.
constexpr size_t kLengthBytes = 8;                // The header's length, little-endian.
constexpr size_t kDigestBytes = 32;
// A header is the memory's counters and the agent's state, its learner's archive the most of it:
// a length past this is a corrupt one.
constexpr uint64_t kMaxHeaderBytes = uint64_t{1} << 30;
// Reads, writes, deflate output and inflate output go through buffers of this size.
constexpr size_t kIoBytes = size_t{1} << 20;
// ISA-L's level 1 (replay_checkpoint.h says why); its level buffer is the size ISA-L's own tools
// use by default.
constexpr uint32_t kDeflateLevel = 1;
constexpr size_t kDeflateLevelBufBytes = ISAL_DEF_LVL1_DEFAULT;
// ISA-L counts in uint32_t: larger buffers are fed in pieces.
constexpr size_t kMaxDeflateChunk = size_t{1} << 30;
constexpr mode_t kCheckpointMode = 0644;

v1::ReplayMemoryOptions OptionsMessage(const ReplayOptions& o) {
  v1::ReplayMemoryOptions m;
  m.set_capacity(o.capacity);
  for (int d : o.frame_shape) m.add_frame_shape(d);
  m.set_frame_stack(o.frame_stack);
  m.set_n_step(o.n_step);
  m.set_gamma(o.gamma);
  m.set_prioritized(o.prioritized);
  m.set_alpha(o.alpha);
  m.set_beta_start(o.beta_start);
  m.set_beta_end(o.beta_end);
  m.set_beta_anneal_samples(o.beta_anneal_samples);
  m.set_priority_epsilon(o.priority_epsilon);
  return m;
}

v1::ReplayMemoryState StateMessage(const ReplayMemoryState& s) {
  v1::ReplayMemoryState m;
  m.set_next_frame(s.next_frame);
  m.set_first_frame(s.first_frame);
  m.set_in_episode(s.in_episode);
  m.set_oldest_id(s.oldest_id);
  m.set_next_id(s.next_id);
  m.set_pending(s.pending);
  m.set_max_priority(s.max_priority);
  m.set_sampled(s.sampled);
  m.set_rng(s.rng);
  return m;
}

ReplayMemoryState StateOf(const v1::ReplayMemoryState& m) {
  ReplayMemoryState s;
  s.next_frame = m.next_frame();
  s.first_frame = m.first_frame();
  s.in_episode = m.in_episode();
  s.oldest_id = m.oldest_id();
  s.next_id = m.next_id();
  s.pending = m.pending();
  s.max_priority = m.max_priority();
  s.sampled = m.sampled();
  s.rng = m.rng();
  return s;
}

// A field of an options message as a person reads it: doubles to the last bit (%.17g), the frame
// shape as {C, H, W}.
std::string FieldText(const google::protobuf::Message& m,
                      const google::protobuf::FieldDescriptor& field) {
  using google::protobuf::FieldDescriptor;
  const google::protobuf::Reflection& r = *m.GetReflection();
  if (field.is_repeated()) {
    std::vector<int32_t> values;
    for (int i = 0; i < r.FieldSize(m, &field); ++i)
      values.push_back(r.GetRepeatedInt32(m, &field, i));
    return absl::StrCat("{", absl::StrJoin(values, ", "), "}");
  }
  switch (field.cpp_type()) {
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return absl::StrFormat("%.17g", r.GetDouble(m, &field));
    case FieldDescriptor::CPPTYPE_BOOL:
      return r.GetBool(m, &field) ? "true" : "false";
    case FieldDescriptor::CPPTYPE_INT32:
      return absl::StrCat(r.GetInt32(m, &field));
    case FieldDescriptor::CPPTYPE_UINT64:
      return absl::StrCat(r.GetUInt64(m, &field));
    default:
      return "?";
  }
}

// OK when the options saved in `path` are `wanted`'s (the seed aside), else FAILED_PRECONDITION
// naming the first that differs and both values. Doubles are compared bit for bit: a restored
// memory computes exactly as the saved one only with the same doubles.
absl::Status CompareOptions(const std::string& path, const v1::ReplayMemoryOptions& saved,
                            const ReplayOptions& wanted) {
  const v1::ReplayMemoryOptions asked = OptionsMessage(wanted);
  const google::protobuf::Descriptor& descriptor = *asked.GetDescriptor();
  for (int i = 0; i < descriptor.field_count(); ++i) {
    const google::protobuf::FieldDescriptor& field = *descriptor.field(i);
    const std::string there = FieldText(saved, field);
    const std::string here = FieldText(asked, field);
    if (there != here) {
      return absl::FailedPreconditionError(absl::StrCat(
          path, " is a replay memory checkpoint of another configuration: ", field.name(), " ",
          there, " in the file, ", here, " asked for"));
    }
  }
  return absl::OkStatus();
}

// Reads exactly `n` bytes at `offset`. A file shorter than that is DATA_LOSS (it shrank under us).
absl::Status PreadAll(int fd, uint8_t* out, size_t n, uint64_t offset, const std::string& path) {
  while (n > 0) {
    const ssize_t got = ::pread(fd, out, n, static_cast<off_t>(offset));
    if (got < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(errno, "cannot read", path);
    }
    if (got == 0) return absl::DataLossError(absl::StrCat(path, ": ends early while being read"));
    out += got;
    n -= static_cast<size_t>(got);
    offset += static_cast<uint64_t>(got);
  }
  return absl::OkStatus();
}

// Writes a checkpoint file: the raw prefix, then the body through ISA-L's deflate (a zlib stream,
// which zlib's inflate reads as well): the header message, then the memory's arrays as Save hands
// them over; then the SHA-256 of all the bytes written before it. Output is buffered kIoBytes at a
// time.
class CheckpointWriter : public ReplaySaveSink {
 public:
  CheckpointWriter(int fd, const std::string& path, const ReplayOptions& options,
                   const v1::AgentState& agent)
      : fd_(fd),
        path_(path),
        options_(options),
        agent_(agent),
        out_(kIoBytes),
        level_buf_(kDeflateLevelBufBytes) {}
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // The prefix, and the header with the memory's state as of its snapshot.
  absl::Status Begin(const ReplayMemoryState& state) override {
    uint8_t prefix[kPrefixBytes];
    std::memcpy(prefix, kMagic, kMagicBytes);
    CodedOutputStream::WriteLittleEndian32ToArray(kReplayCheckpointFormat, prefix + kMagicBytes);
    CONVOY_RETURN_IF_ERROR(Emit(prefix, kPrefixBytes));
    isal_deflate_init(z_.get());
    z_->level = kDeflateLevel;
    z_->level_buf = level_buf_.data();
    z_->level_buf_size = static_cast<uint32_t>(level_buf_.size());
    z_->gzip_flag = IGZIP_ZLIB;
    v1::ReplayCheckpointHeader header;
    *header.mutable_options() = OptionsMessage(options_);
    *header.mutable_memory() = StateMessage(state);
    *header.mutable_agent() = agent_;
    std::string bytes(kLengthBytes, '\0');
    CodedOutputStream::WriteLittleEndian64ToArray(header.ByteSizeLong(),
                                                  reinterpret_cast<uint8_t*>(bytes.data()));
    if (!header.AppendToString(&bytes)) {
      return absl::InternalError(absl::StrCat("cannot encode the header of ", path_));
    }
    return Write(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }

  absl::Status Write(const uint8_t* data, size_t n) override {
    return Deflate(data, n, /*last=*/false);
  }

  // Ends the body and appends the digest.
  absl::Status Finish() {
    CONVOY_RETURN_IF_ERROR(Deflate(nullptr, 0, /*last=*/true));
    CONVOY_RETURN_IF_ERROR(FlushOut());
    const std::array<uint8_t, kDigestBytes> digest = hash_.Finish();
    return WriteAll(
        fd_, absl::string_view(reinterpret_cast<const char*>(digest.data()), kDigestBytes), path_);
  }

 private:
  absl::Status Emit(const uint8_t* data, size_t n) {
    hash_.Update(data, n);
    return WriteAll(fd_, absl::string_view(reinterpret_cast<const char*>(data), n), path_);
  }

  absl::Status FlushOut() {
    if (used_ == 0) return absl::OkStatus();
    const size_t n = used_;
    used_ = 0;
    return Emit(out_.data(), n);
  }

  // Feeds `n` bytes to the stream (ISA-L counts them in uint32_t, so larger ones go in pieces);
  // with `last`, ends the stream and writes out all of it.
  absl::Status Deflate(const uint8_t* data, size_t n, bool last) {
    do {
      const size_t take = std::min(n, kMaxDeflateChunk);
      z_->next_in = const_cast<uint8_t*>(data);
      z_->avail_in = static_cast<uint32_t>(take);
      z_->end_of_stream = last && take == n ? 1 : 0;
      while (true) {
        z_->next_out = out_.data() + used_;
        z_->avail_out = static_cast<uint32_t>(out_.size() - used_);
        if (isal_deflate(z_.get()) != COMP_OK) {
          return absl::InternalError(absl::StrCat("deflate failed writing ", path_));
        }
        used_ = out_.size() - z_->avail_out;
        if (used_ == out_.size()) CONVOY_RETURN_IF_ERROR(FlushOut());
        const bool done = z_->end_of_stream ? z_->internal_state.state == ZSTATE_END
                                            : z_->avail_in == 0 && z_->avail_out > 0;
        if (done) break;
      }
      data += take;
      n -= take;
    } while (n > 0);
    return absl::OkStatus();
  }

  const int fd_;
  const std::string& path_;
  const ReplayOptions& options_;
  const v1::AgentState& agent_;
  std::vector<uint8_t> out_;
  size_t used_ = 0;
  std::vector<uint8_t> level_buf_;
  // ISA-L's states hold their own buffers (tens of KB): on the heap, not on a saving thread's
  // stack.
  const std::unique_ptr<isal_zstream> z_ = std::make_unique<isal_zstream>();
  Sha256Stream hash_;
};

// Reads a checkpoint's body: `size` deflated bytes from `offset` on, inflated by ISA-L kIoBytes at
// a time into a buffer that Read copies out of (a memory's reads are a frame each). Errors:
// DATA_LOSS naming the file when the body does not inflate, fails its checksum, ends early or runs
// on; ErrnoError's code when reading fails.
class CheckpointReader : public ReplayArraySource {
 public:
  CheckpointReader(int fd, uint64_t offset, uint64_t size, const std::string& path)
      : fd_(fd), offset_(offset), remaining_(size), path_(path), in_(kIoBytes), out_(kIoBytes) {
    isal_inflate_init(z_.get());
    z_->crc_flag = ISAL_ZLIB;
  }
  CheckpointReader(const CheckpointReader&) = delete;
  CheckpointReader& operator=(const CheckpointReader&) = delete;

  // Exactly `n` bytes of the body.
  absl::Status Read(uint8_t* out, size_t n) override {
    while (n > 0) {
      if (next_ == end_) {
        if (ended_) return Corrupt("the body ends early");
        CONVOY_RETURN_IF_ERROR(Inflate());
        continue;
      }
      const size_t take = std::min(n, end_ - next_);
      std::memcpy(out, out_.data() + next_, take);
      next_ += take;
      out += take;
      n -= take;
    }
    return absl::OkStatus();
  }

  // OK when the body ends here and nothing follows it.
  absl::Status ExpectEnd() {
    while (next_ == end_ && !ended_) CONVOY_RETURN_IF_ERROR(Inflate());
    if (next_ != end_) return Corrupt("the body runs on past its end");
    if (z_->avail_in != 0 || remaining_ != 0) return Corrupt("bytes follow the body");
    return absl::OkStatus();
  }

  absl::Status Corrupt(absl::string_view why) const override {
    return absl::DataLossError(
        absl::StrCat(path_, ": not a valid replay memory checkpoint body: ", why));
  }

 private:
  // Refills the output buffer with one inflate call, reading more of the file first when the
  // input is used up.
  absl::Status Inflate() {
    if (z_->avail_in == 0 && remaining_ > 0) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(remaining_, in_.size()));
      CONVOY_RETURN_IF_ERROR(PreadAll(fd_, in_.data(), n, offset_, path_));
      offset_ += n;
      remaining_ -= n;
      z_->next_in = in_.data();
      z_->avail_in = static_cast<uint32_t>(n);
    }
    z_->next_out = out_.data();
    z_->avail_out = static_cast<uint32_t>(out_.size());
    const uint32_t avail_in = z_->avail_in;
    const int rc = isal_inflate(z_.get());
    if (rc != ISAL_DECOMP_OK) {
      return Corrupt(absl::StrCat("the body does not inflate (", InflateError(rc), ")"));
    }
    next_ = 0;
    end_ = out_.size() - z_->avail_out;
    if (z_->block_state == ISAL_BLOCK_FINISH) {
      ended_ = true;
    } else if (end_ == 0 && z_->avail_in == avail_in && remaining_ == 0) {
      // Neither output nor input moved and there is no more to read: the stream stops short.
      return Corrupt("the body is cut short");
    }
    return absl::OkStatus();
  }

  static const char* InflateError(int rc) {
    switch (rc) {
      case ISAL_INVALID_BLOCK:
        return "an invalid block";
      case ISAL_INVALID_SYMBOL:
        return "an invalid symbol";
      case ISAL_INVALID_LOOKBACK:
        return "an invalid distance";
      case ISAL_INVALID_WRAPPER:
      case ISAL_UNSUPPORTED_METHOD:
        return "not a zlib stream";
      case ISAL_INCORRECT_CHECKSUM:
        return "its Adler-32 does not match";
      case ISAL_NEED_DICT:
        return "it asks for a dictionary";
      default:
        return "ISA-L inflate error";
    }
  }

  const int fd_;
  uint64_t offset_;
  uint64_t remaining_;
  const std::string& path_;
  std::vector<uint8_t> in_;
  std::vector<uint8_t> out_;
  size_t next_ = 0;  // out_[next_, end_) is inflated and not yet read
  size_t end_ = 0;
  const std::unique_ptr<inflate_state> z_ = std::make_unique<inflate_state>();
  bool ended_ = false;
};

// Opens `path` and checks it is a whole checkpoint of this format: its magic, its digest (before
// anything is parsed, so that a torn or corrupted file is told apart from one of another
// configuration or format), then its format. *size gets the file's size.
absl::StatusOr<int> OpenVerified(const std::string& path, uint64_t* size) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, "cannot open", path);
  auto close_fd = absl::MakeCleanup([fd] { ::close(fd); });
  struct stat info;
  if (::fstat(fd, &info) != 0) return ErrnoError(errno, "cannot stat", path);
  *size = static_cast<uint64_t>(info.st_size);

  uint8_t prefix[kPrefixBytes];
  const size_t prefix_read = static_cast<size_t>(std::min<uint64_t>(*size, kPrefixBytes));
  CONVOY_RETURN_IF_ERROR(PreadAll(fd, prefix, prefix_read, 0, path));
  if (prefix_read < kMagicBytes || std::memcmp(prefix, kMagic, kMagicBytes) != 0) {
    return absl::DataLossError(absl::StrCat(
        path, ": not a replay memory checkpoint (it does not start with ", kMagic, ")"));
  }
  if (*size < kPrefixBytes + kDigestBytes) {
    return absl::DataLossError(absl::StrCat(path, ": truncated replay memory checkpoint (", *size,
                                            " bytes, fewer than a prefix and a digest)"));
  }
  const uint64_t digested = *size - kDigestBytes;
  Sha256Stream hash;
  std::vector<uint8_t> buffer(kIoBytes);
  for (uint64_t offset = 0; offset < digested;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(buffer.size(), digested - offset));
    CONVOY_RETURN_IF_ERROR(PreadAll(fd, buffer.data(), n, offset, path));
    hash.Update(buffer.data(), n);
    offset += n;
  }
  uint8_t stored_digest[kDigestBytes];
  CONVOY_RETURN_IF_ERROR(PreadAll(fd, stored_digest, kDigestBytes, digested, path));
  if (std::memcmp(hash.Finish().data(), stored_digest, kDigestBytes) != 0) {
    return absl::DataLossError(absl::StrCat(
        path, ": truncated or corrupted replay memory checkpoint (its SHA-256 does not match)"));
  }
  uint32_t format = 0;
  CodedInputStream::ReadLittleEndian32FromArray(prefix + kMagicBytes, &format);
  if (format != kReplayCheckpointFormat) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, ": replay memory checkpoint format ", format,
        format < kReplayCheckpointFormat ? " (a hand-written header, of an older build)" : "",
        "; this build reads format ", kReplayCheckpointFormat,
        ": resume with the build that wrote it, or remove it to start with an empty memory"));
  }
  std::move(close_fd).Cancel();
  return fd;
}

// The header at the start of the body.
absl::Status ReadHeader(CheckpointReader* in, v1::ReplayCheckpointHeader* header) {
  uint8_t length[kLengthBytes];
  CONVOY_RETURN_IF_ERROR(in->Read(length, sizeof(length)));
  uint64_t bytes = 0;
  CodedInputStream::ReadLittleEndian64FromArray(length, &bytes);
  if (bytes > kMaxHeaderBytes) return in->Corrupt("its header's length is out of range");
  std::string encoded(static_cast<size_t>(bytes), '\0');
  CONVOY_RETURN_IF_ERROR(in->Read(reinterpret_cast<uint8_t*>(encoded.data()), encoded.size()));
  if (!header->ParseFromString(encoded)) return in->Corrupt("its header does not parse");
  return absl::OkStatus();
}

}  // namespace

absl::Status SaveReplayCheckpoint(const ReplayMemory& memory, const std::string& path,
                                  const v1::AgentState& agent, absl::Notification* snapshot_taken) {
  // A save that fails before it reaches the memory must not leave its caller waiting.
  const auto notify = absl::MakeCleanup([snapshot_taken]() {
    if (snapshot_taken != nullptr && !snapshot_taken->HasBeenNotified()) snapshot_taken->Notify();
  });
  return WriteFileAtomicallyWith(path, kCheckpointMode,
                                 [&](int fd, const std::string& temp) -> absl::Status {
                                   CheckpointWriter out(fd, temp, memory.options(), agent);
                                   CONVOY_RETURN_IF_ERROR(memory.Save(&out, snapshot_taken));
                                   return out.Finish();
                                 });
}

absl::StatusOr<std::unique_ptr<ReplayMemory>> LoadReplayCheckpoint(const std::string& path,
                                                                   const ReplayOptions& options,
                                                                   v1::AgentState* agent) {
  uint64_t size = 0;
  CONVOY_ASSIGN_OR_RETURN(const int fd, OpenVerified(path, &size));
  const auto close_fd = absl::MakeCleanup([fd] { ::close(fd); });
  CheckpointReader in(fd, kPrefixBytes, size - kDigestBytes - kPrefixBytes, path);
  v1::ReplayCheckpointHeader header;
  CONVOY_RETURN_IF_ERROR(ReadHeader(&in, &header));
  CONVOY_RETURN_IF_ERROR(CompareOptions(path, header.options(), options));
  CONVOY_ASSIGN_OR_RETURN(std::unique_ptr<ReplayMemory> memory, ReplayMemory::Create(options));
  CONVOY_RETURN_IF_ERROR(memory->Restore(StateOf(header.memory()), &in));
  CONVOY_RETURN_IF_ERROR(in.ExpectEnd());
  if (agent != nullptr) *agent = std::move(*header.mutable_agent());
  return memory;
}

absl::StatusOr<std::string> ReplayCheckpointPath(absl::string_view dir,
                                                 absl::string_view agent_id) {
  if (agent_id.empty() || agent_id == "." || agent_id == ".." || absl::StrContains(agent_id, '/') ||
      absl::StrContains(agent_id, '\0')) {
    return absl::InvalidArgumentError(
        absl::StrCat("agent id '", agent_id,
                     "' cannot name its replay checkpoint file: it must be a file name"));
  }
  return absl::StrCat(dir, "/", agent_id, ".replay");
}

ReplayCheckpointer::ReplayCheckpointer(const ReplayMemory* memory, std::string path,
                                       absl::Duration every, absl::Time start)
    : memory_(memory), path_(std::move(path)), every_(every), last_start_(start) {}

ReplayCheckpointer::~ReplayCheckpointer() { Join(); }

void ReplayCheckpointer::Join() {
  if (saver_.joinable()) saver_.join();
}

bool ReplayCheckpointer::Due(absl::Time now) const {
  if (every_ <= absl::ZeroDuration() || now - last_start_ < every_) return false;
  absl::MutexLock lock(&mu_);
  return !in_flight_;
}

void ReplayCheckpointer::Start(v1::AgentState agent, absl::Time now) {
  Join();
  last_start_ = now;
  {
    absl::MutexLock lock(&mu_);
    in_flight_ = true;
  }
  // Shared: the save still looks at it after the notification, when this frame may be gone.
  auto snapshot_taken = std::make_shared<absl::Notification>();
  saver_ = std::thread([this, agent = std::move(agent), snapshot_taken] {
    Save(agent, snapshot_taken.get()).IgnoreError();  // Counted and logged by Save.
  });
  snapshot_taken->WaitForNotification();
}

absl::Status ReplayCheckpointer::SaveNow(const v1::AgentState& agent) {
  Join();
  return Save(agent, nullptr);
}

absl::Status ReplayCheckpointer::Save(const v1::AgentState& agent,
                                      absl::Notification* snapshot_taken) {
  const absl::Time start = absl::Now();
  const absl::Status saved = SaveReplayCheckpoint(*memory_, path_, agent, snapshot_taken);
  const absl::Time end = absl::Now();
  struct stat info;
  const uint64_t bytes =
      saved.ok() && ::stat(path_.c_str(), &info) == 0 ? static_cast<uint64_t>(info.st_size) : 0;
  absl::MutexLock lock(&mu_);
  in_flight_ = false;
  if (!saved.ok()) {
    ++stats_.failures;
    LOG(WARNING) << "replay checkpoint not written (the previous one stays): " << saved;
    return saved;
  }
  ++stats_.saves;
  stats_.last_seconds = absl::ToDoubleSeconds(end - start);
  stats_.last_bytes = bytes;
  stats_.last_time = end;
  LOG(INFO) << "replay checkpoint " << path_ << ": " << bytes << " bytes in " << stats_.last_seconds
            << " s";
  return saved;
}

ReplayCheckpointStats ReplayCheckpointer::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace convoy::agent
