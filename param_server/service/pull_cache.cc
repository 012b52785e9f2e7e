#include "param_server/service/pull_cache.h"

#include <glog/logging.h>

#include <algorithm>
#include <utility>

#include "common/wire/tensor_chunk.h"
#include "common/wire/wire_encoding.h"

namespace convoy::ps {

size_t PullCache::Slot(v1::Network network, TensorEncoding encoding) {
  const size_t n = network == v1::NETWORK_TARGET ? 1 : network == v1::NETWORK_AVERAGE ? 2 : 0;
  return n * 2 + (encoding == TensorEncoding::kBf16 ? 1 : 0);
}

std::shared_ptr<const SerializedPull> PullCache::Serialize(
    std::shared_ptr<const WeightSnapshot> snapshot, v1::Network network, TensorEncoding encoding,
    uint64_t incarnation) {
  auto pull = std::make_shared<SerializedPull>();
  OutgoingChunk<v1::WeightChunk> chunk;
  v1::WeightChunk& header = chunk.header;
  header.set_version(snapshot->version);
  header.set_total_elements(snapshot->values.size());
  header.set_encoding(ToWireEncoding(encoding));
  header.set_network(network);
  header.set_incarnation(incarnation);
  // fp32 chunks refer to the snapshot, which they keep alive until gRPC has sent them.
  chunk.encoding = encoding;
  chunk.keep_alive = snapshot;
  const size_t per_chunk = ElementsPerChunk(encoding);
  const size_t total = snapshot->values.size();
  pull->chunks.reserve((total + per_chunk - 1) / per_chunk);
  for (size_t offset = 0; offset < total; offset += per_chunk) {
    header.set_offset(offset);
    chunk.values = snapshot->values.data() + offset;
    chunk.count = std::min(per_chunk, total - offset);
    grpc::ByteBuffer buffer;
    bool own = false;
    const grpc::Status serialized =
        grpc::SerializationTraits<OutgoingChunk<v1::WeightChunk>>::Serialize(chunk, &buffer, &own);
    CHECK(serialized.ok()) << serialized.error_message();  // Only an allocation can fail.
    pull->bytes += buffer.Length();
    pull->chunks.push_back(std::move(buffer));
  }
  pull->snapshot = std::move(snapshot);
  return pull;
}

std::shared_ptr<const SerializedPull> PullCache::Get(std::shared_ptr<const WeightSnapshot> snapshot,
                                                     v1::Network network, TensorEncoding encoding,
                                                     uint64_t incarnation, bool* built) {
  const size_t slot = Slot(network, encoding);
  {
    absl::MutexLock lock(&mu_);
    const std::shared_ptr<const SerializedPull>& cached = newest_[slot];
    if (cached != nullptr && cached->snapshot == snapshot) {
      if (built != nullptr) *built = false;
      return cached;
    }
  }
  // Serialized outside the lock; two pullers of a new version may both serialize it, and either
  // result is the same bytes.
  std::shared_ptr<const SerializedPull> pull =
      Serialize(std::move(snapshot), network, encoding, incarnation);
  if (built != nullptr) *built = true;
  absl::MutexLock lock(&mu_);
  std::shared_ptr<const SerializedPull>& cached = newest_[slot];
  // Never replace a newer version with an older one (a slow puller of the previous version).
  if (cached == nullptr || cached->snapshot->version <= pull->snapshot->version) cached = pull;
  return pull;
}

}  // namespace convoy::ps
