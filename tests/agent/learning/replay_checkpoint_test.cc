// SaveReplayCheckpoint and LoadReplayCheckpoint: a loaded memory behaves exactly as the saved one,
// the agent's state comes back with it, and a file that is missing, torn, corrupted, of another
// configuration or of another format is refused with its own code.
#include "agent/learning/replay_checkpoint.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "agent/learning/replay_memory.h"
#include "common/support/files.h"
#include "common/support/sha256.h"
#include "tests/agent/learning/replay_test_options.h"
#include "tests/catch.h"
#include "tests/skip.h"

namespace convoy::agent {
namespace {

// Frames of {1, 2, 4}: the frame number twice as little-endian uint32, as in
// replay_memory_test.cc, so that equal observations are equal frames.
constexpr std::array<int, 3> kTinyFrame = {1, 2, 4};

std::vector<uint8_t> NumberedFrame(uint64_t number, size_t bytes) {
  std::vector<uint8_t> frame(bytes);
  for (size_t i = 0; i < bytes; ++i) frame[i] = static_cast<uint8_t>(number >> (8 * (i % 4)));
  return frame;
}

ReplayOptions TinyOptions(bool prioritized) {
  ReplayOptions options = testing::OneStepUniform();
  options.frame_shape = kTinyFrame;
  options.capacity = 1000;
  options.prioritized = prioritized;
  return options;
}

std::unique_ptr<ReplayMemory> MustCreate(const ReplayOptions& options) {
  auto memory = ReplayMemory::Create(options);
  REQUIRE(memory.ok());
  return std::move(memory).value();
}

// A fresh directory, removed with what it holds.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = absl::StrCat(base != nullptr ? base : "/tmp", "/replay-ckpt-XXXXXX");
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    path_ = pattern;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    ::chmod(path_.c_str(), 0755);
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  std::string File(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }
  std::vector<std::string> Names() const {
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(path_)) {
      names.push_back(entry.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  std::string path_;
};

std::string MustRead(const std::string& path) {
  absl::StatusOr<std::string> bytes = ReadFileToString(path);
  REQUIRE(bytes.ok());
  return *std::move(bytes);
}

void MustWrite(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

// Drives a memory with numbered frames: episodes that end terminally, episodes cut by the next
// StartEpisode, and (optionally) one left running; prioritized memories get priorities from
// samples along the way, so that beta, the rng and the sum tree have all moved.
struct Script {
  uint64_t frame = 0;  // the number the next frame gets
  bool running = false;
  size_t frame_bytes = 8;
  std::mt19937_64 rng{7};

  void Start(ReplayMemory* memory) {
    memory->StartEpisode(NumberedFrame(frame++, frame_bytes).data());
    running = true;
  }
  void Step(ReplayMemory* memory, bool terminal) {
    const int action = static_cast<int>(rng() % 5);
    const float reward = static_cast<float>(static_cast<int>(rng() % 200) - 100) / 16.0f;
    memory->Add(action, reward, terminal, NumberedFrame(frame++, frame_bytes).data());
    if (terminal) running = false;
  }
  void Learn(ReplayMemory* memory, ReplayBatch* batch) {
    if (!memory->Sample(4, batch).ok()) return;
    std::vector<float> td(batch->size);
    for (float& t : td) t = static_cast<float>(rng() % 1000) / 100.0f;
    memory->UpdatePriorities(batch->ids.data(), td.data(), batch->size);
  }

  void Fill(ReplayMemory* memory, int episodes, bool leave_running, int running_steps = 2) {
    ReplayBatch batch;
    for (int e = 0; e < episodes; ++e) {
      Start(memory);
      const int steps = 1 + static_cast<int>(rng() % 12);
      const bool terminal = e % 3 == 0;  // the others are cut by the next StartEpisode
      for (int s = 0; s < steps; ++s) {
        Step(memory, terminal && s == steps - 1);
        if (frame % 7 == 0) Learn(memory, &batch);
      }
    }
    if (leave_running) {
      Start(memory);
      for (int s = 0; s < running_steps; ++s) Step(memory, false);
    }
  }
};

void CheckSameBatch(const ReplayBatch& a, const ReplayBatch& b) {
  REQUIRE(a.size == b.size);
  CHECK(a.ids == b.ids);
  CHECK(a.actions == b.actions);
  CHECK(a.returns == b.returns);
  CHECK(a.discounts == b.discounts);
  CHECK(a.weights == b.weights);
  CHECK(a.observations == b.observations);
  CHECK(a.next_observations == b.next_observations);
}

void CheckSameNow(ReplayMemory* original, ReplayMemory* loaded, bool has_frames) {
  REQUIRE(original->size() == loaded->size());
  CHECK(original->beta() == loaded->beta());
  if (has_frames) {
    std::vector<uint8_t> a(original->observation_bytes()), b(loaded->observation_bytes());
    original->CurrentObservation(a.data());
    loaded->CurrentObservation(b.data());
    CHECK(a == b);
  }
}

// Gives both memories the same calls (Adds continuing the episode in progress, new episodes,
// samples and priority updates) and checks that they answer alike after every one.
void CheckSameFuture(ReplayMemory* original, ReplayMemory* loaded, const Script& from, int rounds) {
  Script a = from, b = from;
  a.rng.seed(123);
  b.rng.seed(123);
  ReplayBatch batch_a, batch_b;
  std::mt19937_64 choose(321);
  int samples = 0;
  CheckSameNow(original, loaded, a.frame > 0);
  for (int round = 0; round < rounds; ++round) {
    const uint64_t op = choose() % 8;
    if (!a.running || op == 0) {
      a.Start(original);
      b.Start(loaded);
    } else if (op < 4) {
      const bool terminal = op == 1 && choose() % 3 == 0;
      a.Step(original, terminal);
      b.Step(loaded, terminal);
    } else {
      const size_t n = 1 + choose() % 8;
      const absl::Status sa = original->Sample(n, &batch_a);
      const absl::Status sb = loaded->Sample(n, &batch_b);
      REQUIRE(sa.code() == sb.code());
      if (sa.ok()) {
        ++samples;
        CheckSameBatch(batch_a, batch_b);
        std::vector<float> td(batch_a.size);
        for (float& t : td) t = static_cast<float>(choose() % 1000) / 50.0f;
        original->UpdatePriorities(batch_a.ids.data(), td.data(), batch_a.size);
        loaded->UpdatePriorities(batch_b.ids.data(), td.data(), batch_b.size);
      }
    }
    CheckSameNow(original, loaded, true);
  }
  CHECK(samples > rounds / 8);  // the comparison was not vacuous
}

std::unique_ptr<ReplayMemory> SaveAndLoad(const ReplayMemory& memory, const TempDir& dir) {
  const std::string path = dir.File("replay.ckpt");
  const absl::Status saved = SaveReplayCheckpoint(memory, path);
  INFO(saved);
  REQUIRE(saved.ok());
  auto loaded = LoadReplayCheckpoint(path, memory.options());
  INFO(loaded.status());
  REQUIRE(loaded.ok());
  return std::move(loaded).value();
}

void CheckRoundTrip(const ReplayOptions& options, int episodes, int running_steps = 2) {
  TempDir dir;
  auto original = MustCreate(options);
  Script script;
  script.Fill(original.get(), episodes, /*leave_running=*/true, running_steps);
  REQUIRE(original->size() > 0);
  auto loaded = SaveAndLoad(*original, dir);
  CHECK(loaded->options().capacity == options.capacity);
  CheckSameFuture(original.get(), loaded.get(), script, 400);
}

TEST_CASE("A loaded prioritized memory samples as the saved one: ended, cut and running episodes",
          "[replay][checkpoint]") {
  ReplayOptions options = TinyOptions(/*prioritized=*/true);
  options.n_step = 2;
  options.beta_anneal_samples = 500;  // beta is still moving when saved
  CheckRoundTrip(options, 30);
}

TEST_CASE("A loaded uniform memory samples as the saved one", "[replay][checkpoint]") {
  ReplayOptions options = TinyOptions(/*prioritized=*/false);
  options.n_step = 2;
  CheckRoundTrip(options, 30);
}

TEST_CASE("A loaded memory with frame_stack 4 and n_step 3 samples as the saved one",
          "[replay][checkpoint]") {
  for (bool prioritized : {true, false}) {
    INFO("prioritized " << prioritized);
    ReplayOptions options = TinyOptions(prioritized);
    options.frame_stack = 4;
    options.n_step = 3;
    options.gamma = 0.9;
    // The running episode has n_step - 1 transitions held back when saved.
    CheckRoundTrip(options, 25, /*running_steps=*/5);
  }
}

TEST_CASE("A loaded memory that wrapped around its capacity samples as the saved one",
          "[replay][checkpoint]") {
  for (bool prioritized : {true, false}) {
    INFO("prioritized " << prioritized);
    ReplayOptions options = TinyOptions(prioritized);
    options.capacity = 40;
    options.frame_stack = 3;
    options.n_step = 3;
    TempDir dir;
    auto original = MustCreate(options);
    Script script;
    script.Fill(original.get(), 150, /*leave_running=*/true);
    // Many times the capacity went through it.
    REQUIRE(script.frame > 10 * options.capacity);
    REQUIRE(original->size() > options.capacity / 2);
    auto loaded = SaveAndLoad(*original, dir);
    CheckSameFuture(original.get(), loaded.get(), script, 400);
  }
}

TEST_CASE("An empty memory round-trips, before and after its first StartEpisode",
          "[replay][checkpoint]") {
  for (bool prioritized : {true, false}) {
    INFO("prioritized " << prioritized);
    TempDir dir;
    auto original = MustCreate(TinyOptions(prioritized));
    auto loaded = SaveAndLoad(*original, dir);
    CHECK(loaded->size() == 0);
    ReplayBatch batch;
    CHECK(loaded->Sample(1, &batch).code() == absl::StatusCode::kFailedPrecondition);
    CheckSameFuture(original.get(), loaded.get(), Script(), 200);

    auto started = MustCreate(TinyOptions(prioritized));
    Script script;
    script.Start(started.get());
    auto loaded_started = SaveAndLoad(*started, dir);
    CHECK(loaded_started->size() == 0);
    CheckSameFuture(started.get(), loaded_started.get(), script, 200);
  }
}

TEST_CASE("Saving a loaded memory writes the same file", "[replay][checkpoint]") {
  ReplayOptions options = TinyOptions(/*prioritized=*/true);
  options.frame_stack = 2;
  options.n_step = 3;
  TempDir dir;
  auto original = MustCreate(options);
  Script script;
  script.Fill(original.get(), 40, /*leave_running=*/true);
  REQUIRE(SaveReplayCheckpoint(*original, dir.File("first")).ok());
  auto loaded = LoadReplayCheckpoint(dir.File("first"), options);
  REQUIRE(loaded.ok());
  REQUIRE(SaveReplayCheckpoint(**loaded, dir.File("second")).ok());
  CHECK(MustRead(dir.File("first")) == MustRead(dir.File("second")));
  // Only the files themselves: no temporary file is left beside them.
  CHECK(dir.Names() == std::vector<std::string>{"first", "second"});
}

TEST_CASE("A checkpoint ends with the SHA-256 of everything before it", "[replay][checkpoint]") {
  TempDir dir;
  auto memory = MustCreate(TinyOptions(/*prioritized=*/true));
  Script script;
  script.Fill(memory.get(), 10, /*leave_running=*/true);
  REQUIRE(SaveReplayCheckpoint(*memory, dir.File("replay.ckpt")).ok());
  const std::string bytes = MustRead(dir.File("replay.ckpt"));
  REQUIRE(bytes.size() > 32);
  CHECK(absl::BytesToHexString(bytes.substr(bytes.size() - 32)) ==
        Sha256Hex(absl::string_view(bytes).substr(0, bytes.size() - 32)));
  CHECK(absl::StartsWith(bytes, "CONVOYRM"));
}

// A memory saved to dir/replay.ckpt, with frames big and noisy enough that the file is some
// hundreds of kilobytes.
struct SavedCheckpoint {
  TempDir dir;
  ReplayOptions options;
  std::string path;
  std::string bytes;
  size_t size_when_saved = 0;

  SavedCheckpoint() {
    options = TinyOptions(/*prioritized=*/true);
    options.frame_shape = {3, 16, 16};
    options.n_step = 3;
    options.capacity = 500;
    auto memory = MustCreate(options);
    std::mt19937_64 noise(5);
    std::vector<uint8_t> frame(3 * 16 * 16);
    auto fill = [&] {
      for (uint8_t& v : frame) v = static_cast<uint8_t>(noise());
    };
    fill();
    memory->StartEpisode(frame.data());
    for (int i = 0; i < 400; ++i) {
      fill();
      memory->Add(i % 5, 1.0f, i % 50 == 49, frame.data());
      if (i % 50 == 49) {
        fill();
        memory->StartEpisode(frame.data());
      }
    }
    path = dir.File("replay.ckpt");
    REQUIRE(SaveReplayCheckpoint(*memory, path).ok());
    bytes = MustRead(path);
    size_when_saved = memory->size();
  }
};

TEST_CASE("A truncated checkpoint is DATA_LOSS naming the file", "[replay][checkpoint]") {
  SavedCheckpoint saved;
  const std::string torn = saved.dir.File("torn.ckpt");
  for (size_t keep : {size_t{0}, size_t{5}, size_t{60}, size_t{120}, saved.bytes.size() / 2,
                      saved.bytes.size() - 32, saved.bytes.size() - 1}) {
    INFO("kept " << keep << " of " << saved.bytes.size() << " bytes");
    MustWrite(torn, saved.bytes.substr(0, keep));
    auto loaded = LoadReplayCheckpoint(torn, saved.options);
    INFO(loaded.status());
    CHECK(loaded.status().code() == absl::StatusCode::kDataLoss);
    CHECK(absl::StrContains(loaded.status().message(), torn));
  }
}

TEST_CASE("A checkpoint with one byte flipped is DATA_LOSS naming the file",
          "[replay][checkpoint]") {
  SavedCheckpoint saved;
  const std::string flipped = saved.dir.File("flipped.ckpt");
  // In the header's options (capacity), in the middle of the body, in the digest.
  for (size_t at : {size_t{13}, saved.bytes.size() / 2, saved.bytes.size() - 1}) {
    INFO("byte " << at << " of " << saved.bytes.size());
    std::string bytes = saved.bytes;
    bytes[at] = static_cast<char>(bytes[at] ^ 0x10);
    MustWrite(flipped, bytes);
    auto loaded = LoadReplayCheckpoint(flipped, saved.options);
    INFO(loaded.status());
    CHECK(loaded.status().code() == absl::StatusCode::kDataLoss);
    CHECK(absl::StrContains(loaded.status().message(), flipped));
    CHECK(absl::StrContains(loaded.status().message(), "SHA-256"));
  }
  // The original still loads.
  auto loaded = LoadReplayCheckpoint(saved.path, saved.options);
  REQUIRE(loaded.ok());
  CHECK((*loaded)->size() == saved.size_when_saved);
}

TEST_CASE("A missing checkpoint is NOT_FOUND and another file is DATA_LOSS",
          "[replay][checkpoint]") {
  TempDir dir;
  const ReplayOptions options = TinyOptions(/*prioritized=*/true);
  auto missing = LoadReplayCheckpoint(dir.File("absent.ckpt"), options);
  CHECK(missing.status().code() == absl::StatusCode::kNotFound);
  CHECK(absl::StrContains(missing.status().message(), dir.File("absent.ckpt")));

  MustWrite(dir.File("notes.txt"), std::string(200, 'x'));
  auto other = LoadReplayCheckpoint(dir.File("notes.txt"), options);
  INFO(other.status());
  CHECK(other.status().code() == absl::StatusCode::kDataLoss);
  CHECK(absl::StrContains(other.status().message(), dir.File("notes.txt")));
}

// `header` with `body` as its body and a correct digest: what a writer with a bug would make.
std::string WithDigest(const std::string& header, const std::string& body) {
  const std::string bytes = header + body;
  Sha256Stream digest;
  digest.Update(bytes.data(), bytes.size());
  const std::array<uint8_t, 32> trailer = digest.Finish();
  return bytes + std::string(reinterpret_cast<const char*>(trailer.data()), trailer.size());
}

std::string Deflated(const std::string& bytes) {
  uLongf size = compressBound(bytes.size());
  std::string out(size, '\0');
  REQUIRE(compress(reinterpret_cast<Bytef*>(out.data()), &size,
                   reinterpret_cast<const Bytef*>(bytes.data()), bytes.size()) == Z_OK);
  out.resize(size);
  return out;
}

// zlib's own inflate of a whole stream: the stream must end exactly at the end of `body`.
std::string Inflated(const std::string& body) {
  z_stream z{};
  REQUIRE(inflateInit(&z) == Z_OK);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(body.data()));
  z.avail_in = static_cast<uInt>(body.size());
  std::string out;
  int rc = Z_OK;
  while (rc == Z_OK) {
    char piece[1 << 16];
    z.next_out = reinterpret_cast<Bytef*>(piece);
    z.avail_out = sizeof(piece);
    rc = inflate(&z, Z_NO_FLUSH);
    out.append(piece, sizeof(piece) - z.avail_out);
  }
  inflateEnd(&z);
  REQUIRE(rc == Z_STREAM_END);
  REQUIRE(z.avail_in == 0);
  return out;
}

// The file's prefix: the magic and the format, before the body's zlib stream.
constexpr size_t kPrefixBytes = 12;

uint64_t GetLittleEndian(const std::string& bytes, int n) {
  uint64_t value = 0;
  for (int i = 0; i < n; ++i) value |= uint64_t{static_cast<uint8_t>(bytes[i])} << (8 * i);
  return value;
}

std::string LittleEndian(uint64_t value, int bytes) {
  std::string out;
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>(value >> (8 * i)));
  return out;
}

// A body of `header` alone, length-prefixed, as the file's body starts.
std::string HeaderBody(const v1::ReplayCheckpointHeader& header) {
  return LittleEndian(header.ByteSizeLong(), 8) + header.SerializeAsString();
}

TEST_CASE("A checkpoint whose body does not parse is DATA_LOSS naming the file",
          "[replay][checkpoint]") {
  SavedCheckpoint saved;
  // The body's zlib stream starts 0x78, after the prefix.
  REQUIRE(static_cast<uint8_t>(saved.bytes[kPrefixBytes]) == 0x78);
  const std::string prefix = saved.bytes.substr(0, kPrefixBytes);
  const std::string body = saved.bytes.substr(kPrefixBytes, saved.bytes.size() - kPrefixBytes - 32);
  const std::string raw = Inflated(body);
  v1::ReplayCheckpointHeader header;
  REQUIRE(header.ParseFromString(raw.substr(8, GetLittleEndian(raw, 8))));
  // A state whose counters cannot be: oldest id 5 after next id 3.
  v1::ReplayCheckpointHeader inconsistent = header;
  inconsistent.mutable_memory()->set_oldest_id(5);
  inconsistent.mutable_memory()->set_next_id(3);
  const std::string bad = saved.dir.File("bad.ckpt");
  for (const std::string& bad_body :
       {std::string("not deflate at all"), Deflated("too short"),
        Deflated(LittleEndian(uint64_t{1} << 40, 8)), Deflated(LittleEndian(5, 8) + "12345"),
        Deflated(HeaderBody(inconsistent)), Deflated(HeaderBody(header)), body + "extra",
        body.substr(0, body.size() / 2)}) {
    MustWrite(bad, WithDigest(prefix, bad_body));
    auto loaded = LoadReplayCheckpoint(bad, saved.options);
    INFO(loaded.status());
    CHECK(loaded.status().code() == absl::StatusCode::kDataLoss);
    CHECK(absl::StrContains(loaded.status().message(), bad));
  }
  // The same bytes with the body the save wrote load.
  MustWrite(bad, WithDigest(prefix, body));
  CHECK(LoadReplayCheckpoint(bad, saved.options).ok());
}

TEST_CASE("A checkpoint of the older format is refused naming its format", "[replay][checkpoint]") {
  SavedCheckpoint saved;
  // Format 2 began as this one does, "CONVOYRM" and a little-endian uint32 format, and ended with
  // a SHA-256 too: its digest holds, and its format is what is refused.
  const std::string old = saved.dir.File("old.ckpt");
  MustWrite(old, WithDigest("CONVOYRM" + LittleEndian(2, 4) + std::string(77, '\0'),
                            Deflated("the old body")));
  auto loaded = LoadReplayCheckpoint(old, saved.options);
  INFO(loaded.status());
  CHECK(loaded.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(absl::StrContains(loaded.status().message(), old));
  CHECK(absl::StrContains(loaded.status().message(), "format 2"));
  CHECK(absl::StrContains(loaded.status().message(), "reads format 3"));
}

TEST_CASE(
    "A checkpoint's body is a zlib stream: zlib inflates a saved one, and one zlib deflated loads",
    "[replay][checkpoint]") {
  SavedCheckpoint saved;
  const std::string header = saved.bytes.substr(0, kPrefixBytes);
  const std::string body = saved.bytes.substr(kPrefixBytes, saved.bytes.size() - kPrefixBytes - 32);
  const std::string raw = Inflated(body);
  // Every frame is in it: more than 400 frames of 3x16x16 pixels.
  CHECK(raw.size() > 400 * 3 * 16 * 16);

  // The same state deflated by zlib (at its default level, as no save writes it) loads into the
  // same memory as the file the save wrote.
  const std::string rewritten = saved.dir.File("zlib.ckpt");
  MustWrite(rewritten, WithDigest(header, Deflated(raw)));
  auto original = LoadReplayCheckpoint(saved.path, saved.options);
  auto other = LoadReplayCheckpoint(rewritten, saved.options);
  INFO(other.status());
  REQUIRE(original.ok());
  REQUIRE(other.ok());
  CheckSameNow(original->get(), other->get(), true);
  ReplayBatch a, b;
  REQUIRE((*original)->Sample(16, &a).ok());
  REQUIRE((*other)->Sample(16, &b).ok());
  CheckSameBatch(a, b);

  // A stream whose Adler-32 trailer does not match what it inflates to is refused, even under a
  // correct SHA-256: what a writer with a bug would make.
  std::string bad_sum = Deflated(raw);
  bad_sum.back() = static_cast<char>(bad_sum.back() ^ 1);
  MustWrite(rewritten, WithDigest(header, bad_sum));
  auto refused = LoadReplayCheckpoint(rewritten, saved.options);
  INFO(refused.status());
  CHECK(refused.status().code() == absl::StatusCode::kDataLoss);
  CHECK(absl::StrContains(refused.status().message(), "Adler-32"));
}

TEST_CASE("A checkpoint of another configuration is FAILED_PRECONDITION naming the option",
          "[replay][checkpoint]") {
  SavedCheckpoint saved;
  struct Case {
    const char* field;
    void (*change)(ReplayOptions*);
    const char* saved_value;
    const char* asked_value;
  };
  const Case cases[] = {
      {"capacity", [](ReplayOptions* o) { o->capacity = 800; }, "500", "800"},
      {"frame_shape",
       [](ReplayOptions* o) {
         o->frame_shape = {3, 8, 32};
       },
       "{3, 16, 16}", "{3, 8, 32}"},
      {"n_step", [](ReplayOptions* o) { o->n_step = 1; }, "3", "1"},
      {"frame_stack", [](ReplayOptions* o) { o->frame_stack = 2; }, "1", "2"},
      {"prioritized", [](ReplayOptions* o) { o->prioritized = false; }, "true", "false"},
      {"gamma", [](ReplayOptions* o) { o->gamma = 0.5; }, "0.98999999999999999", "0.5"},
  };
  for (const Case& c : cases) {
    INFO(c.field);
    ReplayOptions asked = saved.options;
    c.change(&asked);
    auto loaded = LoadReplayCheckpoint(saved.path, asked);
    INFO(loaded.status());
    CHECK(loaded.status().code() == absl::StatusCode::kFailedPrecondition);
    const absl::string_view message = loaded.status().message();
    CHECK(absl::StrContains(message, saved.path));
    CHECK(absl::StrContains(message, c.field));
    CHECK(absl::StrContains(message, c.saved_value));
    CHECK(absl::StrContains(message, c.asked_value));
  }
  // The seed is not compared: the random state comes from the file.
  ReplayOptions reseeded = saved.options;
  reseeded.seed = 99;
  CHECK(LoadReplayCheckpoint(saved.path, reseeded).ok());
}

TEST_CASE("A save into a read-only directory fails and leaves the old checkpoint",
          "[replay][checkpoint]") {
  if (::geteuid() == 0) CONVOY_SKIP("root writes into read-only directories");
  SavedCheckpoint saved;
  auto memory = LoadReplayCheckpoint(saved.path, saved.options);
  REQUIRE(memory.ok());
  Script script;
  script.frame_bytes = (*memory)->frame_bytes();
  script.Fill(memory->get(), 5, /*leave_running=*/false);
  REQUIRE(::chmod(saved.dir.path().c_str(), 0555) == 0);
  const absl::Status written = SaveReplayCheckpoint(**memory, saved.path);
  ::chmod(saved.dir.path().c_str(), 0755);
  INFO(written);
  CHECK(!written.ok());
  CHECK(absl::StrContains(written.message(), saved.path));
  CHECK(MustRead(saved.path) == saved.bytes);
  CHECK(saved.dir.Names() == std::vector<std::string>{"replay.ckpt"});
}

TEST_CASE("A save that fails midway leaves the old checkpoint and no temporary file",
          "[replay][checkpoint]") {
  SavedCheckpoint saved;
  auto memory = LoadReplayCheckpoint(saved.path, saved.options);
  REQUIRE(memory.ok());
  Script script;
  script.frame_bytes = (*memory)->frame_bytes();
  script.Fill(memory->get(), 5, /*leave_running=*/false);
  // Writes past a quarter of the old file's size fail with EFBIG (not SIGXFSZ), root or not: the
  // new file is cut off in its body.
  rlimit before{};
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &before) == 0);
  struct sigaction ignore {
  }, previous{};
  ignore.sa_handler = SIG_IGN;
  REQUIRE(::sigaction(SIGXFSZ, &ignore, &previous) == 0);
  rlimit small = before;
  small.rlim_cur = saved.bytes.size() / 4;
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
  const absl::Status written = SaveReplayCheckpoint(**memory, saved.path);
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &before) == 0);
  REQUIRE(::sigaction(SIGXFSZ, &previous, nullptr) == 0);
  INFO(written);
  CHECK(!written.ok());
  CHECK(absl::StrContains(written.message(), saved.path));
  CHECK(MustRead(saved.path) == saved.bytes);
  CHECK(saved.dir.Names() == std::vector<std::string>{"replay.ckpt"});
  auto reloaded = LoadReplayCheckpoint(saved.path, saved.options);
  REQUIRE(reloaded.ok());
  CHECK((*reloaded)->size() == saved.size_when_saved);
}

TEST_CASE("Saves while another thread adds are consistent snapshots", "[replay][checkpoint]") {
  // Episodes of kLength steps cut by StartEpisode: transition id k has observation frame
  // k + k / kLength, so a loaded memory's ids, observations and next observations can be checked
  // against each other. Frames of 4 KB make each save copy its frames in several pieces while the
  // writer, far faster than deflate, keeps overwriting the oldest ones.
  constexpr uint64_t kLength = 20;
  ReplayOptions options = testing::OneStepUniform();
  options.frame_shape = {1, 64, 64};
  options.frame_stack = 2;
  options.capacity = 3000;
  options.prioritized = true;
  const size_t frame_bytes = 64 * 64;
  auto memory = MustCreate(options);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> episodes{0};
  std::thread writer([&] {
    uint64_t number = 0;
    while (!stop) {
      memory->StartEpisode(NumberedFrame(number++, frame_bytes).data());
      for (uint64_t s = 0; s < kLength; ++s) {
        memory->Add(static_cast<int>(s % 5), 1.0f, false,
                    NumberedFrame(number++, frame_bytes).data());
      }
      ++episodes;
    }
  });
  while (episodes < 2 * options.capacity / kLength) std::this_thread::yield();

  TempDir dir;
  std::vector<std::string> paths;
  for (int i = 0; i < 4; ++i) {
    paths.push_back(dir.File(absl::StrCat("replay", i)));
    const absl::Status saved = SaveReplayCheckpoint(*memory, paths.back());
    INFO(saved);
    CHECK(saved.ok());
  }
  stop = true;
  writer.join();

  // The frame's number, or -1 when it is not one whole numbered frame.
  auto number_of = [&](const uint8_t* frame) -> int64_t {
    const uint32_t number = uint32_t{frame[0]} | uint32_t{frame[1]} << 8 |
                            uint32_t{frame[2]} << 16 | uint32_t{frame[3]} << 24;
    const std::vector<uint8_t> whole = NumberedFrame(number, frame_bytes);
    return std::memcmp(whole.data(), frame, frame_bytes) == 0 ? int64_t{number} : -1;
  };
  for (const std::string& path : paths) {
    INFO(path);
    auto loaded = LoadReplayCheckpoint(path, options);
    INFO(loaded.status());
    REQUIRE(loaded.ok());
    REQUIRE((*loaded)->size() > 0);
    ReplayBatch batch;
    REQUIRE((*loaded)->Sample(256, &batch).ok());
    int wrong = 0;
    for (size_t i = 0; i < batch.size; ++i) {
      const uint64_t id = batch.ids[i];
      const int64_t obs = static_cast<int64_t>(id + id / kLength);
      const int64_t start = static_cast<int64_t>(id / kLength * (kLength + 1));
      const uint8_t* o = batch.observations.data() + i * 2 * frame_bytes;
      const uint8_t* n = batch.next_observations.data() + i * 2 * frame_bytes;
      if (number_of(o) != std::max(obs - 1, start) || number_of(o + frame_bytes) != obs ||
          number_of(n) != obs || number_of(n + frame_bytes) != obs + 1) {
        ++wrong;
      }
    }
    CHECK(wrong == 0);
  }
}

// An agent's state with every part's message set, the learner's archive holding every byte value.
v1::AgentState SomeAgentState() {
  v1::AgentState agent;
  agent.set_agent_id("agent-3");
  agent.set_model("nature_cnn");
  agent.set_seed(7);
  agent.mutable_counters()->set_env_steps(1234);
  agent.mutable_counters()->add_recent_returns(-1.5);
  agent.mutable_exploration()->set_global_epsilon(0.25);
  agent.set_acting_rng("5489");
  std::string archive = "archive";
  for (int i = 0; i < 256; ++i) archive.push_back(static_cast<char>(i));
  agent.mutable_learner()->set_archive(archive);
  agent.mutable_learner()->set_train_credit(0.5);
  return agent;
}

TEST_CASE(
    "The agent's state comes back with the memory; a refused load leaves the caller's as it was",
    "[replay][checkpoint]") {
  const ReplayOptions options = TinyOptions(/*prioritized=*/true);
  auto memory = MustCreate(options);
  Script script;
  script.Fill(memory.get(), 12, /*leave_running=*/true);
  TempDir dir;
  const v1::AgentState agent = SomeAgentState();
  REQUIRE(SaveReplayCheckpoint(*memory, dir.File("replay"), agent).ok());
  v1::AgentState loaded_agent;
  loaded_agent.set_agent_id("before");
  auto loaded = LoadReplayCheckpoint(dir.File("replay"), options, &loaded_agent);
  REQUIRE(loaded.ok());
  CHECK(loaded_agent.SerializeAsString() == agent.SerializeAsString());
  CheckSameNow(memory.get(), loaded->get(), /*has_frames=*/true);

  // No agent's state saved: an empty one. A load that fails leaves the caller's state alone.
  REQUIRE(SaveReplayCheckpoint(*memory, dir.File("plain")).ok());
  REQUIRE(LoadReplayCheckpoint(dir.File("plain"), options, &loaded_agent).ok());
  CHECK(loaded_agent.ByteSizeLong() == 0);
  std::string bytes = MustRead(dir.File("replay"));
  bytes[bytes.size() / 2] ^= 0x20;
  MustWrite(dir.File("torn"), bytes);
  loaded_agent.set_agent_id("kept");
  CHECK(LoadReplayCheckpoint(dir.File("torn"), options, &loaded_agent).status().code() ==
        absl::StatusCode::kDataLoss);
  CHECK(loaded_agent.agent_id() == "kept");
}

TEST_CASE("A save holds the memory as of its snapshot: Adds after the notification are not in it",
          "[replay][checkpoint]") {
  ReplayOptions options = TinyOptions(/*prioritized=*/false);
  options.frame_shape = {1, 64, 64};  // 4 KB frames: the save copies them in several pieces.
  options.capacity = 3000;
  auto memory = MustCreate(options);
  Script script;
  script.frame_bytes = memory->frame_bytes();
  script.Fill(memory.get(), 400, /*leave_running=*/true);
  const size_t size_at_snapshot = memory->size();
  std::vector<uint8_t> observation_at_snapshot(memory->observation_bytes());
  memory->CurrentObservation(observation_at_snapshot.data());

  TempDir dir;
  absl::Notification snapshot;
  absl::Status saved;
  std::thread saver([&] {
    saved = SaveReplayCheckpoint(*memory, dir.File("replay"), SomeAgentState(), &snapshot);
  });
  snapshot.WaitForNotification();
  for (int s = 0; s < 200; ++s) script.Step(memory.get(), false);  // After the snapshot.
  saver.join();
  INFO(saved);
  REQUIRE(saved.ok());
  REQUIRE(memory->size() > size_at_snapshot);
  auto loaded = LoadReplayCheckpoint(dir.File("replay"), options);
  REQUIRE(loaded.ok());
  CHECK((*loaded)->size() == size_at_snapshot);
  std::vector<uint8_t> observation(memory->observation_bytes());
  (*loaded)->CurrentObservation(observation.data());
  CHECK(observation == observation_at_snapshot);

  // A save that fails before its snapshot (no such directory) still lets its caller go on.
  absl::Notification failed_snapshot;
  const absl::Status failed =
      SaveReplayCheckpoint(*memory, dir.File("missing/replay"), SomeAgentState(), &failed_snapshot);
  CHECK(failed.code() == absl::StatusCode::kNotFound);
  CHECK(failed_snapshot.HasBeenNotified());
}

}  // namespace
}  // namespace convoy::agent
