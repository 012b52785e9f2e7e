// Fuzzes checkpoint MANIFEST parsing (Checkpointer::ParseManifest): the text a resumed parameter
// server reads from disk before it trusts any other file of a checkpoint.
//
// Invariants checked, beyond the sanitizers':
// - every error is DATA_LOSS;
// - an accepted manifest is format_version 1, lists weights.pt, target.pt and optimizer.pt, and
//   no file name that could leave the checkpoint directory (empty, ".", "..", or containing '/');
// - an accepted manifest printed back as text parses again to the same message.
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/stubs/logging.h>
#include <google/protobuf/text_format.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "convoy/v1/checkpoint.pb.h"
#include "param_server/core/checkpointer.h"
#include "tests/fuzz/fuzz_invariant.h"

namespace convoy {
namespace {

using fuzz::Check;

std::string Canonical(const v1::CheckpointManifest& manifest) {
  std::string bytes;
  google::protobuf::io::StringOutputStream stream(&bytes);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  manifest.SerializeToCodedStream(&coded);
  coded.Trim();
  return bytes;
}

void RunOne(const std::string& text) {
  const absl::StatusOr<v1::CheckpointManifest> manifest = ps::Checkpointer::ParseManifest(text);
  if (!manifest.ok()) {
    Check(absl::IsDataLoss(manifest.status()),
          "ParseManifest failed with a code other than DATA_LOSS");
    return;
  }
  Check(manifest->format_version() == 1, "accepted a manifest of another format_version");
  std::set<std::string> names;
  for (const v1::CheckpointFile& f : manifest->files()) {
    Check(!f.name().empty() && f.name() != "." && f.name() != ".." &&
              !absl::StrContains(f.name(), "/"),
          "accepted a file name outside the checkpoint directory");
    names.insert(f.name());
  }
  for (const char* required : {"weights.pt", "target.pt", "optimizer.pt"}) {
    Check(names.count(required) == 1, "accepted a manifest missing a required file");
  }

  std::string printed;
  Check(google::protobuf::TextFormat::PrintToString(*manifest, &printed),
        "cannot print a manifest");
  const absl::StatusOr<v1::CheckpointManifest> reparsed = ps::Checkpointer::ParseManifest(printed);
  Check(reparsed.ok(), "a printed manifest does not parse again");
  // NaN never compares equal to itself, and its payload bits need not survive text; skip those.
  if (!std::isnan(manifest->epsilon())) {
    Check(Canonical(*manifest) == Canonical(*reparsed), "a printed manifest parses to another one");
  }
}

}  // namespace
}  // namespace convoy

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // The text parser logs every syntax error; a fuzzer makes millions of them.
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  convoy::RunOne(std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}
