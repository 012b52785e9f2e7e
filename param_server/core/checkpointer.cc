#include "param_server/core/checkpointer.h"

#include <fcntl.h>
#include <glog/logging.h>
#include <google/protobuf/text_format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/model/weights_file.h"
#include "common/support/files.h"
#include "common/support/sha256.h"
#include "common/support/status_macros.h"

namespace convoy::ps {
namespace {

namespace fs = std::filesystem;

constexpr char kManifestName[] = "MANIFEST";
constexpr char kWeightsName[] = "weights.pt";
constexpr char kTargetName[] = "target.pt";
constexpr char kAverageName[] = "average.pt";
constexpr char kOptimizerName[] = "optimizer.pt";
constexpr char kCheckpointPrefix[] = "ckpt-";
constexpr char kTempPrefix[] = ".tmp-ckpt-";
// An old checkpoint is renamed to this prefix before it is deleted, so a crash in the middle of the
// deletion never leaves a half-deleted ckpt-* directory behind.
constexpr char kDeletingPrefix[] = ".deleting-ckpt-";
constexpr uint32_t kFormatVersion = 1;

// A checkpoint's directory name: the prefix and the decimal version, which fits 64 bits.
bool ParseCheckpointVersion(const std::string& name, uint64_t* version) {
  if (!absl::StartsWith(name, kCheckpointPrefix)) return false;
  const std::string digits = name.substr(sizeof(kCheckpointPrefix) - 1);
  if (digits.empty() || !std::all_of(digits.begin(), digits.end(), ::isdigit)) return false;
  return absl::SimpleAtoi(digits, version);
}

}  // namespace

Checkpointer::Checkpointer(std::string directory, int keep, ModelInfo model, std::string run_id)
    : directory_(std::move(directory)),
      keep_(std::max(1, keep)),
      model_(std::move(model)),
      run_id_(std::move(run_id)) {}

std::string Checkpointer::NewRunId() {
  absl::BitGen rng;
  return absl::StrCat(absl::FormatTime("%Y%m%dT%H%M%SZ", absl::Now(), absl::UTCTimeZone()), "-",
                      absl::Hex(absl::Uniform<uint64_t>(rng), absl::kZeroPad16));
}

std::vector<Checkpointer::Found> Checkpointer::Scan(const std::string& directory, bool warn) {
  std::vector<Found> found;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(directory, ec)) {
    const std::string name = entry.path().filename().string();
    if (!absl::StartsWith(name, kCheckpointPrefix)) continue;
    uint64_t name_version = 0;
    std::error_code type_ec;
    if (!ParseCheckpointVersion(name, &name_version) || !entry.is_directory(type_ec)) {
      LOG_IF(WARNING, warn) << "skipping " << entry.path().string()
                            << ": not a checkpoint (expected a directory ckpt-<64-bit version>)";
      continue;
    }
    absl::StatusOr<std::string> text = ReadFileToString((entry.path() / kManifestName).string());
    absl::StatusOr<v1::CheckpointManifest> manifest =
        text.ok() ? ParseManifest(*text) : absl::StatusOr<v1::CheckpointManifest>(text.status());
    if (!manifest.ok()) {
      LOG_IF(WARNING, warn) << "skipping checkpoint " << entry.path().string() << ": "
                            << manifest.status().message();
      continue;
    }
    found.push_back({manifest->version(), entry.path().string(), manifest->run_id()});
  }
  std::sort(found.begin(), found.end(), std::greater<>());
  return found;
}

absl::Status Checkpointer::CheckUnused(const std::string& directory) {
  const std::vector<Found> found = Scan(directory, /*warn=*/false);
  if (found.empty()) return absl::OkStatus();
  const Found& newest = found.front();
  return absl::FailedPreconditionError(absl::StrCat(
      "checkpoint directory ", directory, " already holds ", found.size(),
      found.size() == 1 ? " checkpoint" : " checkpoints", " (newest: ", newest.path, ", version ",
      newest.version, ", run ", newest.run_id.empty() ? "(unnamed)" : newest.run_id,
      "): pass --resume to continue that run from it, or choose another directory for a new run"));
}

void Checkpointer::AdoptRun(const v1::CheckpointManifest& resumed) {
  if (resumed.run_id().empty()) {
    legacy_is_ours_ = true;
  } else {
    run_id_ = resumed.run_id();
  }
}

bool Checkpointer::Ours(const std::string& run_id) const {
  return run_id == run_id_ || (legacy_is_ours_ && run_id.empty());
}

absl::StatusOr<v1::CheckpointManifest> Checkpointer::ParseManifest(const std::string& text) {
  v1::CheckpointManifest manifest;
  if (!google::protobuf::TextFormat::ParseFromString(text, &manifest)) {
    return absl::DataLossError("manifest is not valid CheckpointManifest text");
  }
  if (manifest.format_version() != kFormatVersion) {
    return absl::DataLossError(absl::StrCat("manifest format_version ", manifest.format_version(),
                                            ", expected ", kFormatVersion));
  }
  for (const char* required : {kWeightsName, kTargetName, kOptimizerName}) {
    const bool listed =
        std::any_of(manifest.files().begin(), manifest.files().end(),
                    [&](const v1::CheckpointFile& f) { return f.name() == required; });
    if (!listed) return absl::DataLossError(absl::StrCat("manifest does not list ", required));
  }
  for (const v1::CheckpointFile& f : manifest.files()) {
    if (f.name().empty() || absl::StrContains(f.name(), "/") || f.name() == "." ||
        f.name() == "..") {
      return absl::DataLossError(absl::StrCat("manifest lists a bad file name '", f.name(), "'"));
    }
  }
  return manifest;
}

absl::StatusOr<v1::CheckpointManifest> Checkpointer::VerifyManifest(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileToString(absl::StrCat(path, "/", kManifestName));
  if (!text.ok()) return absl::DataLossError(absl::StrCat(path, " has no MANIFEST"));
  absl::StatusOr<v1::CheckpointManifest> manifest = ParseManifest(*text);
  if (!manifest.ok()) {
    return absl::DataLossError(absl::StrCat(path, ": ", manifest.status().message()));
  }
  for (const v1::CheckpointFile& f : manifest->files()) {
    const std::string file = absl::StrCat(path, "/", f.name());
    absl::StatusOr<FileDigest> digest = Sha256OfFile(file);
    if (!digest.ok()) return absl::DataLossError(absl::StrCat(file, " is missing"));
    if (digest->size != f.size()) {
      return absl::DataLossError(absl::StrCat(
          file, " has ", digest->size, " bytes, the manifest says ", f.size(), " (truncated?)"));
    }
    if (digest->sha256 != f.sha256()) {
      return absl::DataLossError(absl::StrCat(file, " fails its SHA-256 check (corrupt)"));
    }
  }
  return manifest;
}

v1::ShardInfo ShardInfoOf(const ShardMap& map, uint32_t index, const ModelInfo& model) {
  v1::ShardInfo info;
  info.set_num_shards(map.num_shards());
  info.set_shard_index(index);
  info.set_begin(map.ranges[index].begin);
  info.set_end(map.ranges[index].end);
  info.set_map_digest(map.digest);
  info.set_model_parameter_count(model.parameter_count);
  return info;
}

absl::StatusOr<LoadedCheckpoint> Checkpointer::LoadWholeModel(const std::string& path,
                                                              const ModelInfo& model) {
  namespace fs = std::filesystem;
  std::error_code error;
  if (fs::exists(path + "/MANIFEST", error)) return Load(path, model);
  uint32_t shards = 0;
  while (fs::is_directory(absl::StrCat(path, "/shard-", shards), error)) ++shards;
  if (shards == 0) {
    absl::StatusOr<LoadedCheckpoint> newest = Checkpointer(path, 1, model).LoadNewest();
    if (!newest.ok() && newest.status().code() == absl::StatusCode::kNotFound) {
      return absl::NotFoundError(absl::StrCat(
          path,
          " holds no checkpoint: give a checkpoint directory (ckpt-...), a run's checkpoint "
          "directory, or a sharded run's (shard-0, shard-1, ...)"));
    }
    return newest;
  }
  CONVOY_ASSIGN_OR_RETURN(const ShardMap map, MakeShardMap(model, shards));
  LoadedCheckpoint whole;
  whole.path = path;
  whole.weights.reserve(model.parameter_count);
  whole.target.reserve(model.parameter_count);
  for (uint32_t i = 0; i < shards; ++i) {
    const std::string directory = absl::StrCat(path, "/shard-", i);
    Checkpointer shard(directory, 1, ShardModel(model, map, i));
    shard.set_shard(
        ShardInfoOf(map, i, model));  // Another split's checkpoint is refused, naming both.
    absl::StatusOr<LoadedCheckpoint> loaded = shard.LoadNewest();
    if (!loaded.ok()) {
      return absl::Status(loaded.status().code(),
                          absl::StrCat("shard ", i, " of the ", shards, " in ", path, ": ",
                                       loaded.status().message()));
    }
    if (i == 0) whole.manifest = loaded->manifest;
    whole.weights.insert(whole.weights.end(), loaded->weights.begin(), loaded->weights.end());
    whole.target.insert(whole.target.end(), loaded->target.begin(), loaded->target.end());
    LOG(INFO) << "shard " << i << " of " << shards << ": " << loaded->path << " (version "
              << loaded->manifest.version() << ")";
  }
  whole.manifest.set_parameter_count(model.parameter_count);
  whole.manifest.clear_shard();
  return whole;
}

absl::StatusOr<LoadedCheckpoint> Checkpointer::Load(const std::string& path, const ModelInfo& model,
                                                    const v1::ShardInfo* shard) {
  CONVOY_ASSIGN_OR_RETURN(v1::CheckpointManifest manifest, VerifyManifest(path));
  if (manifest.model_fingerprint() != model.fingerprint) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint ", path, " holds model '", manifest.model_fingerprint(),
                     "', this server runs '", model.fingerprint, "'"));
  }
  if (shard != nullptr) {
    const uint32_t n = manifest.has_shard() ? manifest.shard().num_shards() : 1;
    const uint32_t i = manifest.has_shard() ? manifest.shard().shard_index() : 0;
    const bool digests_differ = manifest.has_shard() && !shard->map_digest().empty() &&
                                manifest.shard().map_digest() != shard->map_digest();
    if (n != shard->num_shards() || i != shard->shard_index() || digests_differ) {
      return absl::FailedPreconditionError(absl::StrCat(
          "checkpoint ", path, " holds shard ", i, " of ", n,
          manifest.has_shard() ? absl::StrCat(" (map ", manifest.shard().map_digest(), ")") : "",
          ", this server is shard ", shard->shard_index(), " of ", shard->num_shards(), " (map ",
          shard->map_digest(),
          "): resume with the --num_shards and --shard_index it was written "
          "with, or start from another --checkpoint_dir"));
    }
  }
  LoadedCheckpoint loaded;
  loaded.path = path;
  loaded.manifest = std::move(manifest);
  for (auto [name, out] :
       {std::pair{kWeightsName, &loaded.weights}, std::pair{kTargetName, &loaded.target}}) {
    const std::string file = absl::StrCat(path, "/", name);
    CONVOY_ASSIGN_OR_RETURN(const std::string bytes, ReadFileToString(file));
    CONVOY_ASSIGN_OR_RETURN(*out, DecodeWeights(bytes, model.layout, file));
  }
  const auto& listed = loaded.manifest.files();
  if (std::any_of(listed.begin(), listed.end(),
                  [](const v1::CheckpointFile& f) { return f.name() == kAverageName; })) {
    const std::string file = absl::StrCat(path, "/", kAverageName);
    CONVOY_ASSIGN_OR_RETURN(const std::string bytes, ReadFileToString(file));
    CONVOY_ASSIGN_OR_RETURN(loaded.average, DecodeWeights(bytes, model.layout, file));
  }
  CONVOY_ASSIGN_OR_RETURN(loaded.optimizer_state,
                          ReadFileToString(absl::StrCat(path, "/", kOptimizerName)));
  return loaded;
}

namespace {
constexpr char kStartsJournal[] = "starts";
}  // namespace

absl::Status Checkpointer::RecordResumedStart(const ResumedStart& start) {
  std::error_code error;
  std::filesystem::create_directories(directory_, error);
  const std::string path = absl::StrCat(directory_, "/", kStartsJournal);
  const int fd = open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError(errno, "cannot open the starts journal", path);
  absl::Status written =
      WriteAll(fd,
               absl::StrCat("incarnation=", start.incarnation, " version=", start.version,
                            " writer=", start.writer, " run=", run_id_, "\n"),
               path);
  if (written.ok() && fsync(fd) != 0) written = ErrnoError(errno, "cannot fsync", path);
  close(fd);
  CONVOY_RETURN_IF_ERROR(written);
  return FsyncDirectory(directory_);
}

std::vector<ResumedStart> Checkpointer::ResumedStarts() const {
  std::vector<ResumedStart> starts;
  absl::StatusOr<std::string> journal =
      ReadFileToString(absl::StrCat(directory_, "/", kStartsJournal));
  if (!journal.ok()) return starts;
  for (absl::string_view line : absl::StrSplit(*journal, '\n', absl::SkipEmpty())) {
    ResumedStart start;
    std::string run;
    int fields = 0;
    for (absl::string_view item : absl::StrSplit(line, ' ')) {
      const std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(item, '=');
      if (kv.first == "incarnation") fields += absl::SimpleAtoi(kv.second, &start.incarnation);
      if (kv.first == "version") fields += absl::SimpleAtoi(kv.second, &start.version);
      if (kv.first == "writer") fields += absl::SimpleAtoi(kv.second, &start.writer);
      if (kv.first == "run") {
        run = std::string(kv.second);
        ++fields;
      }
    }
    if (fields == 4 && Ours(run)) starts.push_back(start);
  }
  return starts;
}

absl::StatusOr<std::string> Checkpointer::Write(const CheckpointData& data) {
  std::error_code ec;
  fs::create_directories(directory_, ec);
  if (ec) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create checkpoint directory ", directory_, ": ", ec.message()));
  }
  const uint64_t version = data.manifest.version();
  const std::string final_path =
      absl::StrCat(directory_, "/", kCheckpointPrefix, absl::StrFormat("%020d", version));
  if (fs::exists(final_path, ec)) {
    // Ours already: nothing to do. Another run's: never taken over. Torn or corrupt: replaced
    // below.
    absl::StatusOr<v1::CheckpointManifest> existing = VerifyManifest(final_path);
    if (existing.ok() && Ours(existing->run_id())) return final_path;
    if (existing.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(final_path, " is a checkpoint of run ",
                                                        existing->run_id(), ", not of this run ",
                                                        run_id_, "; not overwritten"));
    }
    LOG(WARNING) << "replacing damaged checkpoint " << final_path << ": "
                 << existing.status().message();
  }

  absl::BitGen rng;
  const std::string temp_path = absl::StrCat(directory_, "/", kTempPrefix, version, "-", ::getpid(),
                                             "-", absl::Uniform<uint32_t>(rng));
  if (!fs::create_directory(temp_path, ec)) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create ", temp_path, ": ", ec ? ec.message() : "exists"));
  }
  auto fail = [&](absl::Status status) {
    std::error_code ignored;
    fs::remove_all(temp_path, ignored);
    return status;
  };

  v1::CheckpointManifest manifest = data.manifest;
  manifest.set_format_version(kFormatVersion);
  manifest.set_run_id(run_id_);
  manifest.clear_files();
  std::vector<std::pair<const char*, std::string>> files = {
      {kWeightsName, EncodeWeights(data.weights->values.data(), model_.layout)},
      {kTargetName, EncodeWeights(data.target->values.data(), model_.layout)},
      {kOptimizerName, data.optimizer_state},
  };
  if (data.average != nullptr) {
    files.emplace_back(kAverageName, EncodeWeights(data.average->values.data(), model_.layout));
  }
  for (const auto& [name, bytes] : files) {
    if (absl::Status s = WriteNewFileDurably(absl::StrCat(temp_path, "/", name), bytes, 0644);
        !s.ok()) {
      return fail(s);
    }
    v1::CheckpointFile* entry = manifest.add_files();
    entry->set_name(name);
    entry->set_size(bytes.size());
    entry->set_sha256(Sha256Hex(bytes));
  }
  std::string text;
  google::protobuf::TextFormat::PrintToString(manifest, &text);
  if (absl::Status s = WriteNewFileDurably(absl::StrCat(temp_path, "/", kManifestName), text, 0644);
      !s.ok()) {
    return fail(s);
  }
  if (absl::Status s = FsyncDirectory(temp_path); !s.ok()) return fail(s);
  if (fs::exists(final_path, ec))
    fs::remove_all(final_path, ec);  // A torn leftover of this version.
  if (::rename(temp_path.c_str(), final_path.c_str()) != 0) {
    return fail(ErrnoError(errno, "cannot rename checkpoint into", final_path));
  }
  CONVOY_RETURN_IF_ERROR(FsyncDirectory(directory_));
  Prune();
  return final_path;
}

void Checkpointer::Prune() const {
  std::vector<Found> ours = Scan(directory_, /*warn=*/false);
  ours.erase(
      std::remove_if(ours.begin(), ours.end(), [&](const Found& f) { return !Ours(f.run_id); }),
      ours.end());
  std::error_code ec;
  for (size_t i = static_cast<size_t>(keep_); i < ours.size(); ++i) {
    const std::string doomed =
        absl::StrCat(directory_, "/", kDeletingPrefix, ours[i].version, "-", ::getpid());
    if (::rename(ours[i].path.c_str(), doomed.c_str()) != 0) {
      LOG(WARNING) << "cannot remove old checkpoint " << ours[i].path << ": "
                   << std::strerror(errno);
    }
  }
  // Checkpoints being deleted, and temporary directories of writes that died half-way.
  for (const fs::directory_entry& entry : fs::directory_iterator(directory_, ec)) {
    const std::string name = entry.path().filename().string();
    const bool ours_in_flight = absl::StartsWith(name, kTempPrefix) &&
                                absl::StrContains(name, absl::StrCat("-", ::getpid(), "-"));
    if ((absl::StartsWith(name, kTempPrefix) || absl::StartsWith(name, kDeletingPrefix)) &&
        !ours_in_flight) {
      std::error_code removed;
      fs::remove_all(entry.path(), removed);
    }
  }
}

absl::StatusOr<LoadedCheckpoint> Checkpointer::LoadNewest() const {
  std::error_code ec;
  if (!fs::is_directory(directory_, ec)) {
    return absl::NotFoundError(absl::StrCat("cannot read checkpoint directory ", directory_, ": ",
                                            ec ? ec.message() : "missing, or not a directory"));
  }
  // Order by the version each manifest records. A directory that looks like a checkpoint but has no
  // readable manifest is reported, not silently ignored.
  for (const Found& candidate : Scan(directory_, /*warn=*/true)) {
    const std::string& path = candidate.path;
    absl::StatusOr<LoadedCheckpoint> loaded = Load(path, model_, &shard_);
    // Another model's checkpoint is a misconfiguration, not damage: refuse rather than start fresh.
    if (loaded.ok() || loaded.status().code() == absl::StatusCode::kFailedPrecondition)
      return loaded;
    LOG(WARNING) << "skipping checkpoint " << path << ": " << loaded.status().message();
  }
  return absl::NotFoundError(absl::StrCat("no valid checkpoint in ", directory_));
}

}  // namespace convoy::ps
