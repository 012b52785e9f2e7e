#include "agent/agent_checkpoint.h"

#include <glog/logging.h>
#include <sys/stat.h>

#include <memory>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "agent/learning/replay_memory.h"

namespace convoy {

std::string EncodeAgentCheckpoint(const AgentCheckpoint& checkpoint) {
  msgpack::sbuffer buffer;
  msgpack::pack(buffer, checkpoint);
  return std::string(buffer.data(), buffer.size());
}

absl::StatusOr<AgentCheckpoint> DecodeAgentCheckpoint(absl::string_view bytes,
                                                      absl::string_view path) {
  AgentCheckpoint checkpoint;
  checkpoint.format = 0;  // A map without the key is not one of ours.
  try {
    const msgpack::object_handle handle = msgpack::unpack(bytes.data(), bytes.size());
    handle.get().convert(checkpoint);
  } catch (const std::exception& e) {
    return absl::DataLossError(absl::StrCat(
        path, ": the agent's state in the replay checkpoint does not parse (", e.what(), ")"));
  }
  if (checkpoint.format != AgentCheckpoint::kFormat) {
    return absl::DataLossError(absl::StrCat(path, ": the agent's state is of format ",
                                            checkpoint.format, ", this build reads format ",
                                            AgentCheckpoint::kFormat));
  }
  return checkpoint;
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

void ReplayCheckpointer::Start(std::string annex, absl::Time now) {
  Join();
  last_start_ = now;
  {
    absl::MutexLock lock(&mu_);
    in_flight_ = true;
  }
  // Shared: SaveTo still looks at it after the notification, when this frame may be gone.
  auto snapshot_taken = std::make_shared<absl::Notification>();
  saver_ = std::thread([this, annex = std::move(annex), snapshot_taken] {
    Save(annex, snapshot_taken.get()).IgnoreError();  // Counted and logged by Save.
  });
  snapshot_taken->WaitForNotification();
}

absl::Status ReplayCheckpointer::SaveNow(std::string annex) {
  Join();
  return Save(annex, nullptr);
}

absl::Status ReplayCheckpointer::Save(const std::string& annex,
                                      absl::Notification* snapshot_taken) {
  const absl::Time start = absl::Now();
  const absl::Status saved = memory_->SaveTo(path_, annex, snapshot_taken);
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

}  // namespace convoy
