#include "common/model/weights_file.h"

#include <torch/torch.h>

#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/support/files.h"

namespace convoy {

std::string EncodeWeights(const float* flat, const std::vector<ParameterSlot>& layout) {
  c10::Dict<std::string, at::Tensor> dict;
  for (const ParameterSlot& slot : layout) {
    dict.insert(slot.name, torch::from_blob(const_cast<float*>(flat) + slot.offset, slot.shape,
                                            torch::kFloat32));
  }
  std::vector<char> bytes = torch::pickle_save(c10::IValue(dict));
  return std::string(bytes.begin(), bytes.end());
}

absl::StatusOr<std::vector<float>> DecodeWeights(const std::string& bytes,
                                                 const std::vector<ParameterSlot>& layout,
                                                 const std::string& what) {
  size_t total = 0;
  for (const ParameterSlot& slot : layout) total += slot.numel;
  std::vector<float> flat(total);
  try {
    c10::IValue value = torch::pickle_load(std::vector<char>(bytes.begin(), bytes.end()));
    if (!value.isGenericDict()) {
      return absl::DataLossError(absl::StrCat(what, " does not hold a dict of tensors"));
    }
    c10::impl::GenericDict dict = value.toGenericDict();
    if (dict.size() != layout.size()) {
      return absl::DataLossError(absl::StrCat(what, " holds ", dict.size(),
                                              " tensors, the model has ", layout.size()));
    }
    for (const ParameterSlot& slot : layout) {
      auto it = dict.find(slot.name);
      if (it == dict.end()) {
        return absl::DataLossError(absl::StrCat(what, " lacks parameter ", slot.name));
      }
      at::Tensor t = it->value().toTensor().to(torch::kFloat32).contiguous();
      if (t.sizes().vec() != slot.shape) {
        return absl::DataLossError(absl::StrCat(what, ": parameter ", slot.name, " has shape ",
                                                c10::str(t.sizes()), ", the model's is ",
                                                c10::str(c10::IntArrayRef(slot.shape))));
      }
      std::memcpy(flat.data() + slot.offset, t.data_ptr<float>(), slot.numel * sizeof(float));
    }
  } catch (const c10::Error& e) {
    return absl::DataLossError(
        absl::StrCat(what, " is not a readable tensor archive: ", e.what_without_backtrace()));
  }
  return flat;
}

absl::StatusOr<std::vector<float>> ReadWeightsFile(const std::string& path,
                                                   const std::vector<ParameterSlot>& layout) {
  std::string file = path;
  if (std::filesystem::is_directory(path)) file = absl::StrCat(path, "/weights.pt");
  absl::StatusOr<std::string> bytes = ReadFileToString(file);
  if (!bytes.ok()) {
    return absl::Status(bytes.status().code(),
                        absl::StrCat("cannot read weights: ", bytes.status().message()));
  }
  return DecodeWeights(*std::move(bytes), layout, file);
}

absl::Status WriteWeightsFile(const std::string& path, const float* flat,
                              const std::vector<ParameterSlot>& layout) {
  const std::string bytes = EncodeWeights(flat, layout);
  return WriteFileAtomically(path, bytes, 0644);
}

}  // namespace convoy
