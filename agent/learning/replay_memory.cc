#include "agent/learning/replay_memory.h"

#include <fcntl.h>
#include <glog/logging.h>
#include <isa-l/igzip_lib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "common/support/files.h"
#include "common/support/sha256.h"
#include "common/support/status_macros.h"

namespace convoy {
namespace {

// Frames are allocated this many at a time as the ring first fills, so a small run does not pay for
// a large capacity and no Add allocates more than once per chunk.
constexpr size_t kFramesPerChunk = 64;
constexpr int kMaxFrameStack = 256;

bool IsFinite(double x) { return std::isfinite(x); }

// The checkpoint file (SaveTo, LoadFrom), integers little-endian, doubles and floats as their
// IEEE-754 bits:
//   header, raw, kHeaderBytes: "CONVOYRM", u32 format version, then the options a load must match:
//     u64 capacity, 3 x i32 frame_shape, i32 frame_stack, i32 n_step, f64 gamma, u8 prioritized,
//     f64 alpha, f64 beta_start, f64 beta_end, u64 beta_anneal_samples, f64 priority_epsilon;
//   body, one zlib (deflate) stream (RFC 1950, written and read by ISA-L's igzip) of:
//     state: u64 next_frame, u64 first_frame (the oldest frame written), u8 in_episode,
//       u64 oldest_id, u64 next_id, u64 pending, f64 max_priority, u64 sampled, u32 n and n bytes
//       of the std::mt19937_64 as operator<< writes it, u64 m and m bytes of the caller's annex;
//     per frame in [first_frame, next_frame): u16 depth;
//     per id in [oldest_id, next_id): u64 observation frame, i32 action, f32 reward, u8 terminal,
//       and when prioritized f64 priority (0 for a held-back one);
//     per frame in [first_frame, next_frame): its frame_bytes pixels;
//   trailer: the SHA-256 of everything before it (32 bytes), so that a torn or corrupted file is
//     found before anything is parsed.
// first_frame is the first frame of the oldest held transition's stack (of the current stack when
// none is held): every frame from there on is some held transition's or the current stack's.
constexpr char kMagic[] = "CONVOYRM";
constexpr size_t kMagicBytes = sizeof(kMagic) - 1;
constexpr uint32_t kFormatVersion = 2;  // 2: the annex.
constexpr size_t kHeaderBytes = kMagicBytes + 4 + 8 + 3 * 4 + 4 + 4 + 8 + 1 + 4 * 8 + 8;
constexpr size_t kStateBytes = 8 + 8 + 1 + 8 + 8 + 8 + 8 + 8 + 4;
constexpr size_t kDigestBytes = 32;
// The mt19937_64 state is 312 decimal numbers; anything much longer is not one.
constexpr uint32_t kMaxRngTextBytes = 1 << 16;
// An annex is the caller's counters and learner: a length past this is a corrupt one.
constexpr uint64_t kMaxAnnexBytes = uint64_t{1} << 30;
// Reads, writes, deflate output and inflate output go through buffers of this size.
constexpr size_t kIoBytes = size_t{1} << 20;
// A save copies frames under the mutex this many bytes at a time (at least one frame).
constexpr size_t kSavePieceBytes = size_t{4} << 20;
// Transitions and depths are encoded this many at a time.
constexpr size_t kRecordsPerBatch = 4096;
// ISA-L's level 1: on rendered frames it saves 3.7 times faster than zlib's fastest level for a
// file 1% larger (docs/benchmarks.md), and a save is what an Add may wait for. Its level buffer is
// the size ISA-L's own tools use by default.
constexpr uint32_t kDeflateLevel = 1;
constexpr size_t kDeflateLevelBufBytes = ISAL_DEF_LVL1_DEFAULT;
// ISA-L counts in uint32_t: larger buffers are fed in pieces.
constexpr size_t kMaxDeflateChunk = size_t{1} << 30;
constexpr mode_t kCheckpointMode = 0644;

// Little-endian encoding and decoding.
void PutLe(uint64_t value, int bytes, std::string* out) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>(value >> (8 * i)));
}
void PutU8(uint8_t v, std::string* out) { PutLe(v, 1, out); }
void PutU16(uint16_t v, std::string* out) { PutLe(v, 2, out); }
void PutU32(uint32_t v, std::string* out) { PutLe(v, 4, out); }
void PutU64(uint64_t v, std::string* out) { PutLe(v, 8, out); }
void PutI32(int32_t v, std::string* out) { PutLe(static_cast<uint32_t>(v), 4, out); }
void PutF32(float v, std::string* out) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  PutLe(bits, 4, out);
}
void PutF64(double v, std::string* out) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  PutLe(bits, 8, out);
}

// Reads fields in order from a buffer the caller has checked is long enough.
class Decoder {
 public:
  explicit Decoder(const uint8_t* data) : p_(data) {}
  uint8_t U8() { return static_cast<uint8_t>(Le(1)); }
  uint16_t U16() { return static_cast<uint16_t>(Le(2)); }
  uint32_t U32() { return static_cast<uint32_t>(Le(4)); }
  uint64_t U64() { return Le(8); }
  int32_t I32() { return static_cast<int32_t>(U32()); }
  float F32() {
    const uint32_t bits = U32();
    float v;
    std::memcpy(&v, &bits, sizeof(v));
    return v;
  }
  double F64() {
    const uint64_t bits = U64();
    double v;
    std::memcpy(&v, &bits, sizeof(v));
    return v;
  }

 private:
  uint64_t Le(int bytes) {
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= uint64_t{p_[i]} << (8 * i);
    p_ += bytes;
    return v;
  }
  const uint8_t* p_;
};

std::string EncodeHeader(const ReplayOptions& o) {
  std::string out(kMagic, kMagicBytes);
  PutU32(kFormatVersion, &out);
  PutU64(o.capacity, &out);
  for (int d : o.frame_shape) PutI32(d, &out);
  PutI32(o.frame_stack, &out);
  PutI32(o.n_step, &out);
  PutF64(o.gamma, &out);
  PutU8(o.prioritized ? 1 : 0, &out);
  PutF64(o.alpha, &out);
  PutF64(o.beta_start, &out);
  PutF64(o.beta_end, &out);
  PutU64(o.beta_anneal_samples, &out);
  PutF64(o.priority_epsilon, &out);
  DCHECK_EQ(out.size(), kHeaderBytes);
  return out;
}

// The options of a header whose magic has been checked; *version gets its format version.
ReplayOptions DecodeHeader(const uint8_t* header, uint32_t* version) {
  Decoder in(header + kMagicBytes);
  ReplayOptions o;
  *version = in.U32();
  o.capacity = in.U64();
  for (int& d : o.frame_shape) d = in.I32();
  o.frame_stack = in.I32();
  o.n_step = in.I32();
  o.gamma = in.F64();
  o.prioritized = in.U8() != 0;
  o.alpha = in.F64();
  o.beta_start = in.F64();
  o.beta_end = in.F64();
  o.beta_anneal_samples = in.U64();
  o.priority_epsilon = in.F64();
  return o;
}

std::string ShapeString(const std::array<int, 3>& shape) {
  return absl::StrCat("{", shape[0], ", ", shape[1], ", ", shape[2], "}");
}

// Bit-for-bit: a restored memory computes exactly as the saved one only with the same doubles.
bool SameDouble(double a, double b) { return std::memcmp(&a, &b, sizeof(a)) == 0; }

// OK when the options saved in `path` are `wanted`'s (the seed aside), else FAILED_PRECONDITION
// naming the first that differs and both values.
absl::Status CompareOptions(const std::string& path, const ReplayOptions& saved,
                            const ReplayOptions& wanted) {
  auto differs = [&path](absl::string_view field, const auto& there, const auto& here) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " is a replay memory checkpoint of another configuration: ", field, " ",
                     there, " in the file, ", here, " asked for"));
  };
  auto g = [](double v) { return absl::StrFormat("%.17g", v); };
  if (saved.capacity != wanted.capacity) {
    return differs("capacity", saved.capacity, wanted.capacity);
  }
  if (saved.frame_shape != wanted.frame_shape) {
    return differs("frame_shape", ShapeString(saved.frame_shape), ShapeString(wanted.frame_shape));
  }
  if (saved.frame_stack != wanted.frame_stack) {
    return differs("frame_stack", saved.frame_stack, wanted.frame_stack);
  }
  if (saved.n_step != wanted.n_step) return differs("n_step", saved.n_step, wanted.n_step);
  if (!SameDouble(saved.gamma, wanted.gamma)) {
    return differs("gamma", g(saved.gamma), g(wanted.gamma));
  }
  if (saved.prioritized != wanted.prioritized) {
    return differs("prioritized", saved.prioritized ? "true" : "false",
                   wanted.prioritized ? "true" : "false");
  }
  if (!SameDouble(saved.alpha, wanted.alpha)) {
    return differs("alpha", g(saved.alpha), g(wanted.alpha));
  }
  if (!SameDouble(saved.beta_start, wanted.beta_start)) {
    return differs("beta_start", g(saved.beta_start), g(wanted.beta_start));
  }
  if (!SameDouble(saved.beta_end, wanted.beta_end)) {
    return differs("beta_end", g(saved.beta_end), g(wanted.beta_end));
  }
  if (saved.beta_anneal_samples != wanted.beta_anneal_samples) {
    return differs("beta_anneal_samples", saved.beta_anneal_samples, wanted.beta_anneal_samples);
  }
  if (!SameDouble(saved.priority_epsilon, wanted.priority_epsilon)) {
    return differs("priority_epsilon", g(saved.priority_epsilon), g(wanted.priority_epsilon));
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

// Runs `f` when it goes out of scope.
template <typename F>
class AtExit {
 public:
  explicit AtExit(F f) : f_(std::move(f)) {}
  AtExit(const AtExit&) = delete;
  AtExit& operator=(const AtExit&) = delete;
  ~AtExit() { f_(); }

 private:
  F f_;
};

// Closes a descriptor on every return path.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;
  ~FdCloser() { ::close(fd_); }

 private:
  int fd_;
};

}  // namespace

// Writes a checkpoint file: raw header bytes, then the body through ISA-L's deflate (a zlib stream,
// which zlib's inflate reads as well), then the SHA-256 of all the bytes written before it. Output
// is buffered kIoBytes at a time.
class ReplayMemory::CheckpointWriter {
 public:
  CheckpointWriter(int fd, const std::string& path)
      : fd_(fd), path_(path), out_(kIoBytes), level_buf_(kDeflateLevelBufBytes) {}
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  absl::Status WriteHeader(absl::string_view bytes) {
    return Emit(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }

  void StartBody() {
    isal_deflate_init(z_.get());
    z_->level = kDeflateLevel;
    z_->level_buf = level_buf_.data();
    z_->level_buf_size = static_cast<uint32_t>(level_buf_.size());
    z_->gzip_flag = IGZIP_ZLIB;
  }

  absl::Status Write(const uint8_t* data, size_t n) { return Deflate(data, n, /*last=*/false); }
  absl::Status Write(const std::string& bytes) {
    return Write(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
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
class ReplayMemory::CheckpointReader {
 public:
  CheckpointReader(int fd, uint64_t offset, uint64_t size, const std::string& path)
      : fd_(fd), offset_(offset), remaining_(size), path_(path), in_(kIoBytes), out_(kIoBytes) {
    isal_inflate_init(z_.get());
    z_->crc_flag = ISAL_ZLIB;
  }
  CheckpointReader(const CheckpointReader&) = delete;
  CheckpointReader& operator=(const CheckpointReader&) = delete;

  // Exactly `n` bytes of the body.
  absl::Status Read(uint8_t* out, size_t n) {
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

  absl::Status Corrupt(absl::string_view why) const {
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

absl::StatusOr<std::unique_ptr<ReplayMemory>> ReplayMemory::Create(const ReplayOptions& options) {
  auto invalid = [](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat("ReplayOptions: ", parts...));
  };
  for (int d : options.frame_shape) {
    if (d <= 0) {
      return invalid("frame_shape must be positive {C, H, W}, got {", options.frame_shape[0], ", ",
                     options.frame_shape[1], ", ", options.frame_shape[2], "}");
    }
  }
  if (options.frame_stack < 1 || options.frame_stack > kMaxFrameStack) {
    return invalid("frame_stack must be in [1, ", kMaxFrameStack, "], got ", options.frame_stack);
  }
  if (options.n_step < 1) return invalid("n_step must be at least 1, got ", options.n_step);
  if (options.capacity < 1) return invalid("capacity must be at least 1");
  if (!IsFinite(options.gamma) || options.gamma < 0.0 || options.gamma > 1.0) {
    return invalid("gamma must be in [0, 1], got ", options.gamma);
  }
  if (options.prioritized) {
    if (!IsFinite(options.alpha) || options.alpha < 0.0) {
      return invalid("alpha must be >= 0, got ", options.alpha);
    }
    if (!IsFinite(options.beta_start) || options.beta_start < 0.0 || options.beta_start > 1.0 ||
        !IsFinite(options.beta_end) || options.beta_end < 0.0 || options.beta_end > 1.0) {
      return invalid("beta_start and beta_end must be in [0, 1], got ", options.beta_start, " and ",
                     options.beta_end);
    }
    if (!IsFinite(options.priority_epsilon) || options.priority_epsilon <= 0.0) {
      return invalid("priority_epsilon must be > 0, got ", options.priority_epsilon);
    }
  }
  return std::unique_ptr<ReplayMemory>(new ReplayMemory(options));
}

ReplayMemory::ReplayMemory(const ReplayOptions& options)
    : options_(options),
      frame_bytes_(static_cast<size_t>(options.frame_shape[0]) * options.frame_shape[1] *
                   options.frame_shape[2]),
      frame_slots_(options.capacity + options.frame_stack + options.n_step),
      transition_slots_(options.capacity + options.n_step),
      rng_(options.seed) {
  absl::MutexLock lock(&mu_);
  chunks_.resize((frame_slots_ + kFramesPerChunk - 1) / kFramesPerChunk);
  frame_depth_.assign(frame_slots_, 0);
  obs_frame_.assign(transition_slots_, 0);
  action_.assign(transition_slots_, 0);
  reward_.assign(transition_slots_, 0.0f);
  terminal_.assign(transition_slots_, 0);
  if (options.prioritized) tree_ = std::make_unique<SumTree>(transition_slots_);
}

uint8_t* ReplayMemory::FrameData(uint64_t frame) const {
  const size_t slot = frame % frame_slots_;
  return chunks_[slot / kFramesPerChunk].get() + (slot % kFramesPerChunk) * frame_bytes_;
}

uint64_t ReplayMemory::PushFrame(const uint8_t* frame, bool episode_start) {
  const uint64_t number = next_frame_;
  const uint64_t fs = options_.frame_stack;
  // The write overwrites frame (number - frame_slots_). A transition whose observation is frame o
  // reads frames from o - (frame_stack - 1) on, so each transition with
  // o + frame_slots_ < number + frame_stack goes first.
  while (oldest_id_ < next_id_ &&
         obs_frame_[oldest_id_ % transition_slots_] + frame_slots_ < number + fs) {
    CHECK_LT(oldest_id_, SampleableEnd()) << "frame ring too small for the n-step window";
    DropOldest();
  }
  const size_t slot = number % frame_slots_;
  EnsureChunk(slot);
  std::memcpy(FrameData(number), frame, frame_bytes_);
  uint16_t depth = 0;
  if (!episode_start) {
    depth = std::min<uint16_t>(frame_depth_[(number - 1) % frame_slots_] + 1,
                               static_cast<uint16_t>(options_.frame_stack - 1));
  }
  frame_depth_[slot] = depth;
  ++next_frame_;
  return number;
}

void ReplayMemory::DropOldest() {
  if (tree_ != nullptr) tree_->Set(oldest_id_ % transition_slots_, 0.0);
  ++oldest_id_;
}

void ReplayMemory::ReleaseOldestPending() {
  const uint64_t id = next_id_ - pending_;
  --pending_;
  if (tree_ != nullptr) tree_->Set(id % transition_slots_, max_priority_);
  if (SampleableEnd() - oldest_id_ > options_.capacity) DropOldest();
}

void ReplayMemory::StartEpisode(const uint8_t* first_frame) {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(this, &ReplayMemory::NextFrameWritable));  // a save may need it
  // An episode still running is cut here (a time limit): its held-back windows are now complete.
  while (pending_ > 0) ReleaseOldestPending();
  PushFrame(first_frame, /*episode_start=*/true);
  in_episode_ = true;
}

void ReplayMemory::Add(int action, float reward, bool terminal, const uint8_t* next_frame) {
  absl::MutexLock lock(&mu_);
  CHECK(in_episode_)
      << "ReplayMemory::Add needs StartEpisode first (and again after a terminal Add)";
  mu_.Await(absl::Condition(this, &ReplayMemory::NextFrameWritable));  // a save may need it
  // At most capacity sampleable and n_step - 1 held-back transitions are held, so the slot is free.
  DCHECK_LT(next_id_ - oldest_id_, transition_slots_);
  const uint64_t next_frame_number = PushFrame(next_frame, /*episode_start=*/false);
  const size_t slot = next_id_ % transition_slots_;
  obs_frame_[slot] = next_frame_number - 1;
  action_[slot] = action;
  reward_[slot] = reward;
  terminal_[slot] = terminal ? 1 : 0;
  ++next_id_;
  ++pending_;
  if (terminal) {
    while (pending_ > 0) ReleaseOldestPending();
    in_episode_ = false;
  } else {
    while (pending_ > static_cast<uint64_t>(options_.n_step - 1)) ReleaseOldestPending();
  }
}

void ReplayMemory::CopyStack(uint64_t frame, uint8_t* out) const {
  const int fs = options_.frame_stack;
  const uint64_t depth = frame_depth_[frame % frame_slots_];
  for (int i = 0; i < fs; ++i) {
    const uint64_t back = std::min<uint64_t>(fs - 1 - i, depth);
    std::memcpy(out + i * frame_bytes_, FrameData(frame - back), frame_bytes_);
  }
}

void ReplayMemory::CurrentObservation(uint8_t* out) const {
  absl::MutexLock lock(&mu_);
  CHECK_GT(next_frame_, 0u) << "ReplayMemory::CurrentObservation needs StartEpisode first";
  CopyStack(next_frame_ - 1, out);
}

double ReplayMemory::BetaLocked() const {
  if (options_.beta_anneal_samples == 0) return options_.beta_end;
  const double progress = std::min(
      1.0, static_cast<double>(sampled_) / static_cast<double>(options_.beta_anneal_samples));
  return options_.beta_start + (options_.beta_end - options_.beta_start) * progress;
}

absl::Status ReplayMemory::Sample(size_t n, ReplayBatch* batch) {
  const size_t obs_bytes = observation_bytes();
  // Resized outside the lock: a reused batch does not allocate, a new one does not stall Add.
  batch->size = n;
  batch->observations.resize(n * obs_bytes);
  batch->next_observations.resize(n * obs_bytes);
  batch->actions.resize(n);
  batch->returns.resize(n);
  batch->discounts.resize(n);
  batch->weights.resize(n);
  batch->ids.resize(n);

  absl::MutexLock lock(&mu_);
  const uint64_t end = SampleableEnd();
  const uint64_t held = end - oldest_id_;
  if (held < n) {
    batch->size = 0;
    return absl::FailedPreconditionError(absl::StrCat(
        "replay memory holds ", held, " sampleable transitions, fewer than the ", n, " asked for"));
  }
  if (n == 0) return absl::OkStatus();

  const size_t slots = transition_slots_;
  if (tree_ == nullptr) {
    std::uniform_int_distribution<uint64_t> pick(0, held - 1);
    for (size_t i = 0; i < n; ++i) {
      batch->ids[i] = oldest_id_ + pick(rng_);
      batch->weights[i] = 1.0f;
    }
  } else {
    const double total = tree_->Total();
    const double segment = total / static_cast<double>(n);
    const double beta = BetaLocked();
    const uint64_t oldest_slot = oldest_id_ % slots;
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    double max_weight = 0.0;
    for (size_t i = 0; i < n; ++i) {
      const size_t slot = tree_->Find((static_cast<double>(i) + unit(rng_)) * segment);
      const uint64_t id = oldest_id_ + (slot + slots - oldest_slot) % slots;
      DCHECK_LT(id, end);
      const double probability = tree_->Get(slot) / total;
      const double weight = std::pow(static_cast<double>(held) * probability, -beta);
      batch->ids[i] = id;
      batch->weights[i] = static_cast<float>(weight);
      max_weight = std::max(max_weight, weight);
    }
    for (size_t i = 0; i < n; ++i) {
      batch->weights[i] = static_cast<float>(batch->weights[i] / max_weight);
    }
    sampled_ += n;
  }

  const double gamma = options_.gamma;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t id = batch->ids[i];
    const uint64_t obs = obs_frame_[id % slots];
    double ret = 0.0;
    double discount = 1.0;
    bool terminal = false;
    uint64_t steps = 0;
    for (uint64_t j = 0; j < static_cast<uint64_t>(options_.n_step); ++j) {
      const uint64_t t = id + j;
      // The window ends where the episode was cut: no later transition, or one of a new episode.
      if (j > 0 && (t >= next_id_ || obs_frame_[t % slots] != obs + j)) break;
      ret += discount * reward_[t % slots];
      discount *= gamma;
      steps = j + 1;
      if (terminal_[t % slots]) {
        terminal = true;
        break;
      }
    }
    batch->actions[i] = action_[id % slots];
    batch->returns[i] = static_cast<float>(ret);
    batch->discounts[i] = terminal ? 0.0f : static_cast<float>(discount);
    CopyStack(obs, batch->observations.data() + i * obs_bytes);
    CopyStack(obs + steps, batch->next_observations.data() + i * obs_bytes);
  }
  return absl::OkStatus();
}

void ReplayMemory::UpdatePriorities(const uint64_t* ids, const float* td_errors, size_t n) {
  if (!options_.prioritized) return;
  absl::MutexLock lock(&mu_);
  const uint64_t end = SampleableEnd();
  for (size_t i = 0; i < n; ++i) {
    if (ids[i] < oldest_id_ || ids[i] >= end || !std::isfinite(td_errors[i])) continue;
    // Kept above 0 so that the transition stays sampleable whatever alpha and epsilon give.
    const double priority =
        std::max(std::pow(std::abs(static_cast<double>(td_errors[i])) + options_.priority_epsilon,
                          options_.alpha),
                 std::numeric_limits<double>::min());
    tree_->Set(ids[i] % transition_slots_, priority);
    max_priority_ = std::max(max_priority_, priority);
  }
}

bool ReplayMemory::WaitForSize(size_t n, absl::Duration timeout) const {
  auto reached = [this, n]()
                     ABSL_NO_THREAD_SAFETY_ANALYSIS { return SampleableEnd() - oldest_id_ >= n; };
  const bool ok = mu_.LockWhenWithTimeout(absl::Condition(&reached), timeout);
  mu_.Unlock();
  return ok;
}

size_t ReplayMemory::size() const {
  absl::MutexLock lock(&mu_);
  return SampleableEnd() - oldest_id_;
}

double ReplayMemory::beta() const {
  absl::MutexLock lock(&mu_);
  return BetaLocked();
}

size_t ReplayMemory::bytes_per_transition() const {
  const size_t capacity = options_.capacity;
  size_t total =
      frame_slots_ * (frame_bytes_ + sizeof(uint16_t)) +
      transition_slots_ * (sizeof(uint64_t) + sizeof(int32_t) + sizeof(float) + sizeof(uint8_t));
  if (options_.prioritized) {
    size_t leaves = 1;
    while (leaves < transition_slots_) leaves *= 2;
    total += 2 * leaves * sizeof(double);
  }
  return (total + capacity - 1) / capacity;
}

size_t ReplayMemory::memory_bytes() const {
  absl::MutexLock lock(&mu_);
  size_t frames = allocated_chunks_ * kFramesPerChunk * frame_bytes_;
  const size_t last = chunks_.size() - 1;
  if (chunks_[last] != nullptr) {
    // The last chunk holds only the frames left over.
    frames -= (chunks_.size() * kFramesPerChunk - frame_slots_) * frame_bytes_;
  }
  size_t total = frames + frame_depth_.capacity() * sizeof(uint16_t) +
                 obs_frame_.capacity() * sizeof(uint64_t) + action_.capacity() * sizeof(int32_t) +
                 reward_.capacity() * sizeof(float) + terminal_.capacity() * sizeof(uint8_t);
  if (tree_ != nullptr) total += tree_->memory_bytes();
  return total;
}

void ReplayMemory::EnsureChunk(size_t slot) {
  std::unique_ptr<uint8_t[]>& chunk = chunks_[slot / kFramesPerChunk];
  if (chunk != nullptr) return;
  const size_t frames =
      std::min(kFramesPerChunk, frame_slots_ - (slot / kFramesPerChunk) * kFramesPerChunk);
  chunk.reset(new uint8_t[frames * frame_bytes_]);
  ++allocated_chunks_;
}

void ReplayMemory::CopyFrames(uint64_t first, size_t count, uint8_t* out) const {
  for (size_t i = 0; i < count; ++i) {
    std::memcpy(out + i * frame_bytes_, FrameData(first + i), frame_bytes_);
  }
}

absl::Status ReplayMemory::SaveTo(const std::string& path, absl::string_view annex,
                                  absl::Notification* snapshot_taken) const {
  // A save that fails before its snapshot must not leave its caller waiting.
  const AtExit notify([snapshot_taken]() {
    if (snapshot_taken != nullptr && !snapshot_taken->HasBeenNotified()) snapshot_taken->Notify();
  });
  absl::MutexLock save_lock(&save_mu_);
  return WriteFileAtomicallyWith(path, kCheckpointMode,
                                 [this, annex, snapshot_taken](int fd, const std::string& temp) {
                                   save_mu_.AssertHeld();  // The lambda runs within SaveTo's lock.
                                   return WriteCheckpoint(fd, temp, annex, snapshot_taken);
                                 });
}

// Long (109 lines): the snapshot under the mutex and the writes outside it share a dozen arrays and
// the frame cursor; kept whole until the checkpoint's structure moves to protobuf beside the
// memory.
absl::Status ReplayMemory::WriteCheckpoint(int fd, const std::string& file, absl::string_view annex,
                                           absl::Notification* snapshot_taken) const {
  CheckpointWriter out(fd, file);
  CONVOY_RETURN_IF_ERROR(out.WriteHeader(EncodeHeader(options_)));
  out.StartBody();

  // Everything but the frames is copied at once (some 25 bytes a transition); the frames a piece at
  // a time, oldest first, each piece under the mutex and written outside it. save_floor_ keeps the
  // writes off the frames not yet copied, so the file is the state at the first copy.
  const size_t piece_frames =
      std::min(frame_slots_, std::max<size_t>(1, kSavePieceBytes / frame_bytes_));
  std::vector<uint8_t> piece(piece_frames * frame_bytes_);
  std::string state;
  std::vector<uint16_t> depths;
  std::vector<uint64_t> obs_frames;
  std::vector<int32_t> actions;
  std::vector<float> rewards;
  std::vector<uint8_t> terminals;
  std::vector<double> priorities;
  uint64_t end_frame = 0;
  uint64_t copied = 0;  // frames before this one are in `piece` or written
  size_t in_piece = 0;
  {
    absl::MutexLock lock(&mu_);
    end_frame = next_frame_;
    uint64_t first_frame = end_frame;
    if (end_frame > 0) {
      const uint64_t newest =
          oldest_id_ < next_id_ ? obs_frame_[oldest_id_ % transition_slots_] : end_frame - 1;
      first_frame = newest - frame_depth_[newest % frame_slots_];
    }
    std::ostringstream rng_text;
    rng_text << rng_;
    PutU64(next_frame_, &state);
    PutU64(first_frame, &state);
    PutU8(in_episode_ ? 1 : 0, &state);
    PutU64(oldest_id_, &state);
    PutU64(next_id_, &state);
    PutU64(pending_, &state);
    PutF64(max_priority_, &state);
    PutU64(sampled_, &state);
    PutU32(static_cast<uint32_t>(rng_text.str().size()), &state);
    state += rng_text.str();
    PutU64(annex.size(), &state);

    depths.reserve(end_frame - first_frame);
    for (uint64_t f = first_frame; f < end_frame; ++f) {
      depths.push_back(frame_depth_[f % frame_slots_]);
    }
    const size_t held = next_id_ - oldest_id_;
    obs_frames.resize(held);
    actions.resize(held);
    rewards.resize(held);
    terminals.resize(held);
    if (tree_ != nullptr) priorities.resize(held);
    for (size_t i = 0; i < held; ++i) {
      const size_t slot = (oldest_id_ + i) % transition_slots_;
      obs_frames[i] = obs_frame_[slot];
      actions[i] = action_[slot];
      rewards[i] = reward_[slot];
      terminals[i] = terminal_[slot];
      if (tree_ != nullptr) priorities[i] = tree_->Get(slot);
    }
    in_piece = static_cast<size_t>(std::min<uint64_t>(piece_frames, end_frame - first_frame));
    CopyFrames(first_frame, in_piece, piece.data());
    copied = first_frame + in_piece;
    if (copied < end_frame) save_floor_ = copied;
  }
  if (snapshot_taken != nullptr) snapshot_taken->Notify();
  // However this save ends, the writes must not stay held back.
  const AtExit release_floor([this]() {
    absl::MutexLock lock(&mu_);
    save_floor_ = kNotSaving;
  });

  CONVOY_RETURN_IF_ERROR(out.Write(state));
  CONVOY_RETURN_IF_ERROR(out.Write(reinterpret_cast<const uint8_t*>(annex.data()), annex.size()));
  std::string records;
  for (size_t i = 0; i < depths.size(); ++i) {
    PutU16(depths[i], &records);
    if ((i + 1) % kRecordsPerBatch == 0 || i + 1 == depths.size()) {
      CONVOY_RETURN_IF_ERROR(out.Write(records));
      records.clear();
    }
  }
  for (size_t i = 0; i < obs_frames.size(); ++i) {
    PutU64(obs_frames[i], &records);
    PutI32(actions[i], &records);
    PutF32(rewards[i], &records);
    PutU8(terminals[i], &records);
    if (!priorities.empty()) PutF64(priorities[i], &records);
    if ((i + 1) % kRecordsPerBatch == 0 || i + 1 == obs_frames.size()) {
      CONVOY_RETURN_IF_ERROR(out.Write(records));
      records.clear();
    }
  }
  CONVOY_RETURN_IF_ERROR(out.Write(piece.data(), in_piece * frame_bytes_));
  while (copied < end_frame) {
    {
      absl::MutexLock lock(&mu_);
      in_piece = static_cast<size_t>(std::min<uint64_t>(piece_frames, end_frame - copied));
      CopyFrames(copied, in_piece, piece.data());
      copied += in_piece;
      save_floor_ = copied < end_frame ? copied : kNotSaving;
    }
    CONVOY_RETURN_IF_ERROR(out.Write(piece.data(), in_piece * frame_bytes_));
  }
  return out.Finish();
}

absl::StatusOr<std::unique_ptr<ReplayMemory>> ReplayMemory::LoadFrom(const std::string& path,
                                                                     const ReplayOptions& options,
                                                                     std::string* annex) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, "cannot open", path);
  const FdCloser closer(fd);
  struct stat info;
  if (::fstat(fd, &info) != 0) return ErrnoError(errno, "cannot stat", path);
  const uint64_t size = static_cast<uint64_t>(info.st_size);

  uint8_t header[kHeaderBytes];
  const size_t header_read = static_cast<size_t>(std::min<uint64_t>(size, kHeaderBytes));
  CONVOY_RETURN_IF_ERROR(PreadAll(fd, header, header_read, 0, path));
  if (header_read < kMagicBytes || std::memcmp(header, kMagic, kMagicBytes) != 0) {
    return absl::DataLossError(absl::StrCat(
        path, ": not a replay memory checkpoint (it does not start with ", kMagic, ")"));
  }
  if (size < kHeaderBytes + kDigestBytes) {
    return absl::DataLossError(absl::StrCat(path, ": truncated replay memory checkpoint (", size,
                                            " bytes, fewer than a header and a digest)"));
  }

  // The digest before anything else, so that a torn or corrupted file is told apart from one of
  // another configuration or version.
  const uint64_t digested = size - kDigestBytes;
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

  uint32_t version = 0;
  const ReplayOptions saved = DecodeHeader(header, &version);
  if (version != kFormatVersion) {
    return absl::FailedPreconditionError(absl::StrCat(path, ": replay memory checkpoint format ",
                                                      version, ", this build reads format ",
                                                      kFormatVersion));
  }
  CONVOY_RETURN_IF_ERROR(CompareOptions(path, saved, options));
  CONVOY_ASSIGN_OR_RETURN(std::unique_ptr<ReplayMemory> memory, Create(options));
  CheckpointReader in(fd, kHeaderBytes, digested - kHeaderBytes, path);
  std::string saved_annex;
  CONVOY_RETURN_IF_ERROR(memory->ReadCheckpointBody(&in, &saved_annex));
  if (annex != nullptr) *annex = std::move(saved_annex);
  return memory;
}

// Long (110 lines): reads WriteCheckpoint's fields in its order; kept beside it, whole, until the
// checkpoint's structure moves to protobuf beside the memory.
absl::Status ReplayMemory::ReadCheckpointBody(CheckpointReader* in, std::string* annex) {
  absl::MutexLock lock(&mu_);
  std::vector<uint8_t> buffer;
  buffer.resize(kStateBytes);
  CONVOY_RETURN_IF_ERROR(in->Read(buffer.data(), buffer.size()));
  Decoder state(buffer.data());
  const uint64_t next_frame = state.U64();
  const uint64_t first_frame = state.U64();
  const uint8_t in_episode = state.U8();
  const uint64_t oldest_id = state.U64();
  const uint64_t next_id = state.U64();
  const uint64_t pending = state.U64();
  const double max_priority = state.F64();
  const uint64_t sampled = state.U64();
  const uint32_t rng_bytes = state.U32();

  // Every index below is checked against the ring before it is used: a body that passed the
  // digest was written by SaveTo, but one written by another build must not crash a reader.
  const uint64_t held = next_id - oldest_id;
  if (first_frame > next_frame || next_frame - first_frame > frame_slots_ || in_episode > 1 ||
      oldest_id > next_id || held >= transition_slots_ || pending > held ||
      pending >= static_cast<uint64_t>(options_.n_step) || (in_episode == 0 && pending > 0) ||
      held - pending > options_.capacity || (next_frame == 0 && (held > 0 || in_episode == 1)) ||
      (next_frame > 0 && first_frame == next_frame) || !IsFinite(max_priority) ||
      max_priority <= 0.0 || rng_bytes > kMaxRngTextBytes) {
    return in->Corrupt("its counters are inconsistent");
  }
  std::string rng_text(rng_bytes, '\0');
  CONVOY_RETURN_IF_ERROR(in->Read(reinterpret_cast<uint8_t*>(rng_text.data()), rng_bytes));
  std::istringstream rng_in(rng_text);
  rng_in >> rng_;
  if (rng_in.fail()) return in->Corrupt("its random state does not parse");
  buffer.resize(8);
  CONVOY_RETURN_IF_ERROR(in->Read(buffer.data(), buffer.size()));
  const uint64_t annex_bytes = Decoder(buffer.data()).U64();
  if (annex_bytes > kMaxAnnexBytes) return in->Corrupt("its annex's length is out of range");
  annex->resize(static_cast<size_t>(annex_bytes));
  CONVOY_RETURN_IF_ERROR(in->Read(reinterpret_cast<uint8_t*>(annex->data()), annex->size()));

  const uint16_t max_depth = static_cast<uint16_t>(options_.frame_stack - 1);
  for (uint64_t f = first_frame; f < next_frame;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kRecordsPerBatch, next_frame - f));
    buffer.resize(n * 2);
    CONVOY_RETURN_IF_ERROR(in->Read(buffer.data(), buffer.size()));
    Decoder records(buffer.data());
    for (size_t i = 0; i < n; ++i, ++f) {
      const uint16_t depth = records.U16();
      if (depth > max_depth) return in->Corrupt("a frame's stack depth is out of range");
      frame_depth_[f % frame_slots_] = depth;
    }
  }

  const size_t record_bytes = 8 + 4 + 4 + 1 + (tree_ != nullptr ? 8 : 0);
  const uint64_t sampleable_end = next_id - pending;
  for (uint64_t id = oldest_id; id < next_id;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kRecordsPerBatch, next_id - id));
    buffer.resize(n * record_bytes);
    CONVOY_RETURN_IF_ERROR(in->Read(buffer.data(), buffer.size()));
    Decoder records(buffer.data());
    for (size_t i = 0; i < n; ++i, ++id) {
      const size_t slot = id % transition_slots_;
      const uint64_t obs = records.U64();
      // Observations are consecutive-or-later frames, each with its next frame stored.
      if (obs < first_frame || obs >= next_frame - 1 ||
          (id > oldest_id && obs <= obs_frame_[(id - 1) % transition_slots_])) {
        return in->Corrupt("a transition's frame is out of range");
      }
      obs_frame_[slot] = obs;
      action_[slot] = records.I32();
      reward_[slot] = records.F32();
      const uint8_t terminal = records.U8();
      if (terminal > 1) return in->Corrupt("a transition's terminal flag is not 0 or 1");
      terminal_[slot] = terminal;
      if (tree_ != nullptr) {
        const double priority = records.F64();
        // Sampleable transitions have a positive priority, held-back ones none yet.
        if (id < sampleable_end ? !(IsFinite(priority) && priority > 0.0) : priority != 0.0) {
          return in->Corrupt("a transition's priority is out of range");
        }
        tree_->Set(slot, priority);
      }
    }
  }
  // Every stack a sample or CurrentObservation gathers (newest frame from the oldest transition's
  // observation on) lies within the frames stored.
  if (next_frame > 0) {
    const uint64_t lowest_newest =
        held > 0 ? obs_frame_[oldest_id % transition_slots_] : next_frame - 1;
    for (uint64_t f = lowest_newest; f < next_frame; ++f) {
      if (frame_depth_[f % frame_slots_] > f - first_frame) {
        return in->Corrupt("a stack reaches before the frames stored");
      }
    }
  }

  for (uint64_t f = first_frame; f < next_frame; ++f) {
    EnsureChunk(f % frame_slots_);
    CONVOY_RETURN_IF_ERROR(in->Read(FrameData(f), frame_bytes_));
  }
  CONVOY_RETURN_IF_ERROR(in->ExpectEnd());

  next_frame_ = next_frame;
  in_episode_ = in_episode == 1;
  oldest_id_ = oldest_id;
  next_id_ = next_id;
  pending_ = pending;
  max_priority_ = max_priority;
  sampled_ = sampled;
  return absl::OkStatus();
}

}  // namespace convoy
