#include "param_server/core/lineage.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace convoy::ps {
namespace {

// Describe names at most this many earlier starts, the newest.
constexpr size_t kDescribedStarts = 4;

}  // namespace

void Lineage::Start(uint64_t incarnation, uint64_t version) {
  incarnation_ = incarnation;
  start_version_ = version;
}

bool Lineage::Restore(const v1::CheckpointManifest& manifest) {
  earlier_.clear();
  for (const v1::LineageSegment& s : manifest.lineage()) {
    // Versions past the checkpoint's are not in its weights, whatever a manifest says.
    const uint64_t upto = std::min(s.upto_version(), manifest.version());
    if (s.incarnation() == 0 || s.after_version() > upto) continue;
    earlier_.push_back({s.incarnation(), s.after_version(), upto});
  }
  return manifest.lineage_size() > 0;
}

void Lineage::AddResumedStarts(const std::vector<ResumedStart>& starts) {
  for (const ResumedStart& start : starts) {
    const bool named = start.incarnation == incarnation_ ||
                       std::any_of(earlier_.begin(), earlier_.end(), [&](const Segment& s) {
                         return s.incarnation == start.incarnation;
                       });
    if (!named && HoldsEarlier(start.writer, start.version)) {
      earlier_.push_back({start.incarnation, start.version, start.version});
    }
  }
}

void Lineage::SaveTo(uint64_t version, v1::CheckpointManifest& manifest) const {
  for (const Segment& s : earlier_) {
    v1::LineageSegment* out = manifest.add_lineage();
    out->set_incarnation(s.incarnation);
    out->set_after_version(s.after_version);
    out->set_upto_version(s.upto_version);
  }
  v1::LineageSegment* own = manifest.add_lineage();
  own->set_incarnation(incarnation_);
  own->set_after_version(start_version_);
  own->set_upto_version(version);
}

uint64_t Lineage::WriterOf(const v1::CheckpointManifest& manifest) {
  return manifest.lineage().empty() ? 0 : manifest.lineage().rbegin()->incarnation();
}

bool Lineage::HoldsEarlier(uint64_t incarnation, uint64_t version) const {
  return std::any_of(earlier_.begin(), earlier_.end(), [&](const Segment& s) {
    return s.incarnation == incarnation && s.after_version <= version && version <= s.upto_version;
  });
}

std::string Lineage::Describe() const {
  const size_t skipped =
      earlier_.size() > kDescribedStarts ? earlier_.size() - kDescribedStarts : 0;
  std::vector<std::string> parts;
  if (skipped > 0) parts.push_back(absl::StrCat(skipped, " earlier starts"));
  for (size_t i = skipped; i < earlier_.size(); ++i) {
    const Segment& s = earlier_[i];
    parts.push_back(absl::StrCat("incarnation ", s.incarnation, " versions ", s.after_version, "..",
                                 s.upto_version));
  }
  parts.push_back(
      absl::StrCat("this start (incarnation ", incarnation_, ") from version ", start_version_));
  return absl::StrJoin(parts, ", ");
}

}  // namespace convoy::ps
