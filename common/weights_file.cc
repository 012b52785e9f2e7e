#include "common/weights_file.h"

#include <fcntl.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

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
  std::ifstream in(file, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read weights from ", file));
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return DecodeWeights(std::move(bytes).str(), layout, file);
}

absl::Status WriteWeightsFile(const std::string& path, const float* flat,
                              const std::vector<ParameterSlot>& layout) {
  const std::string bytes = EncodeWeights(flat, layout);
  const std::string temp = absl::StrCat(path, ".tmp");
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return absl::InternalError(absl::StrCat("cannot create ", temp, ": ", std::strerror(errno)));
  size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const std::string error = std::strerror(errno);
      ::close(fd);
      return absl::InternalError(absl::StrCat("cannot write ", temp, ": ", error));
    }
    written += static_cast<size_t>(n);
  }
  const bool synced = ::fsync(fd) == 0;
  ::close(fd);
  if (!synced || ::rename(temp.c_str(), path.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace convoy
