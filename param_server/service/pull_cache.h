// PullCache: each version's PullWeights stream serialized once and shared by every puller of it.
//
// A pull of the newest weights streams the same bytes to every agent that asks for that version:
// the chunks' headers (version, offset, encoding, ...) and data. The cache keeps, for each network
// and encoding, the newest snapshot's chunks as gRPC byte buffers; a pull copies a buffer's slice
// references, not its bytes. fp32 data is not copied at all: its slices refer to the snapshot,
// which they keep alive (common/wire/tensor_chunk.h); bf16 data is encoded once per version instead of
// once per pull. A newer snapshot replaces the entry; streams still sending the older one keep it
// alive until they are done, and the weight store reuses its buffer only after that
// (weight_store.h).
//
// Thread-safe. Its lock is a leaf: held only to look up and replace an entry, never while
// encoding.
#ifndef CONVOY_PARAM_SERVER_SERVICE_PULL_CACHE_H_
#define CONVOY_PARAM_SERVER_SERVICE_PULL_CACHE_H_

#include <grpcpp/support/byte_buffer.h>

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/wire/tensor_encoding.h"
#include "convoy/v1/parameter_server.pb.h"
#include "param_server/core/weight_store.h"

namespace convoy::ps {

// One version's stream, in offset order.
struct SerializedPull {
  std::shared_ptr<const WeightSnapshot> snapshot;
  std::vector<grpc::ByteBuffer> chunks;
  uint64_t bytes = 0;  // On the wire, all chunks.
};

class PullCache {
 public:
  // The stream of `snapshot` of `network` in `encoding` from this server start (`incarnation`):
  // the cached one when `snapshot` is the one it holds, else serialized now and cached. `built`,
  // when given, says which.
  std::shared_ptr<const SerializedPull> Get(std::shared_ptr<const WeightSnapshot> snapshot,
                                            v1::Network network, TensorEncoding encoding,
                                            uint64_t incarnation, bool* built = nullptr)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Each chunk of a stream, serialized: its header and `count` elements of the snapshot from
  // `offset`. The bytes are protobuf's for the same WeightChunk.
  static std::shared_ptr<const SerializedPull> Serialize(
      std::shared_ptr<const WeightSnapshot> snapshot, v1::Network network, TensorEncoding encoding,
      uint64_t incarnation);

 private:
  // Networks (online, target, average) x encodings (fp32, bf16).
  static constexpr size_t kSlots = 6;
  static size_t Slot(v1::Network network, TensorEncoding encoding);

  absl::Mutex mu_;
  std::array<std::shared_ptr<const SerializedPull>, kSlots> newest_ ABSL_GUARDED_BY(mu_);
};

}  // namespace convoy::ps

#endif  // CONVOY_PARAM_SERVER_SERVICE_PULL_CACHE_H_
