#include "agent/client/ps_client.h"

#include <glog/logging.h>

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/wire/grpc_status.h"
#include "common/wire/tensor_chunk.h"
#include "common/wire/wire_encoding.h"

namespace convoy::agent {
namespace {

constexpr int kMaxMessageBytes = static_cast<int>(kMaxChunkPayloadBytes) + 1024;

std::shared_ptr<grpc::Channel> MakeChannel(const PsClientOptions& options,
                                           std::shared_ptr<grpc::ChannelCredentials> credentials) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  // Reconnect quickly after a server restart; the call-level retry loop adds jittered backoff on
  // top. GRPC_ARG_MIN_RECONNECT_BACKOFF_MS is left alone: gRPC takes it as the least time a
  // connection attempt may take, and at 100 ms a TLS handshake on a busy machine never finished in
  // time.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  // With a keepalive time set, gRPC sets TCP_USER_TIMEOUT to the keepalive timeout: a call whose
  // data goes unacknowledged that long (a silent link) fails then. The pings themselves are an hour
  // apart: convoy_ps keeps gRPC's server ping policy, which ends a connection pinged more often
  // than every five minutes without data.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 3600 * 1000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
              static_cast<int>(absl::ToInt64Milliseconds(options.silent_link_timeout)));
  // Its own connections, not shared with other channels to the same server: a fresh channel must
  // not inherit a connection that failed or is stuck connecting.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  if (!options.security.tls_server_name.empty()) {
    args.SetSslTargetNameOverride(options.security.tls_server_name);
  }
  return grpc::CreateCustomChannel(options.address, credentials, args);
}

uint64_t NewPushSession() {
  absl::BitGen rng;
  return absl::Uniform<uint64_t>(absl::IntervalClosed, rng, 1, UINT64_MAX);
}

// "/convoy.v1.ParameterServer/<method>" of the two tensor streams, as the generated stub names
// them; made once, since gRPC keeps the pointers.
struct TensorMethodNames {
  std::string pull = absl::StrCat("/", v1::ParameterServer::service_full_name(), "/PullWeights");
  std::string push = absl::StrCat("/", v1::ParameterServer::service_full_name(), "/PushGradients");
};
const TensorMethodNames& MethodNames() {
  static const TensorMethodNames* const names = new TensorMethodNames;
  return *names;
}

void Prepare(grpc::ClientContext* context, const PsClientOptions& options) {
  context->set_deadline(absl::ToChronoTime(absl::Now() + options.call_timeout));
  AddAuthToken(context, options.security.auth_token);
}

}  // namespace

PsClient::PsClient(PsClientOptions options)
    : PsClient(options, grpc::InsecureChannelCredentials(),
               MakeChannel(options, grpc::InsecureChannelCredentials())) {
  CHECK(options_.security.insecure && options_.security.tls_ca_file.empty())
      << "a TLS client is made with PsClient::Create";
}

absl::StatusOr<std::unique_ptr<PsClient>> PsClient::Create(PsClientOptions options) {
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      MakeChannelCredentials(options.security);
  if (!credentials.ok()) return credentials.status();
  std::shared_ptr<grpc::Channel> channel = MakeChannel(options, *credentials);
  return std::unique_ptr<PsClient>(
      new PsClient(std::move(options), *std::move(credentials), std::move(channel)));
}

PsClient::PsClient(PsClientOptions options, std::shared_ptr<grpc::Channel> channel)
    : PsClient(std::move(options), nullptr, std::move(channel)) {}

PsClient::PsClient(PsClientOptions options, std::shared_ptr<grpc::ChannelCredentials> credentials,
                   std::shared_ptr<grpc::Channel> channel)
    : options_(std::move(options)),
      credentials_(std::move(credentials)),
      connection_(std::make_unique<Connection>(std::move(channel))),
      push_session_(NewPushSession()) {}

PsClient::~PsClient() = default;

PsClient::Connection::Connection(std::shared_ptr<grpc::Channel> c)
    : channel(std::move(c)),
      stub(v1::ParameterServer::NewStub(channel)),
      pull_method(MethodNames().pull.c_str(), grpc::internal::RpcMethod::SERVER_STREAMING, channel),
      push_method(MethodNames().push.c_str(), grpc::internal::RpcMethod::CLIENT_STREAMING,
                  channel) {}

absl::Status PsClient::Connect() {
  if (options_.connect_timeout == absl::InfiniteDuration()) return absl::OkStatus();
  auto state_of = [](const std::unique_ptr<Connection>& c, bool try_to_connect) {
    return c == nullptr ? GRPC_CHANNEL_SHUTDOWN : c->channel->GetState(try_to_connect);
  };
  auto failed = [](grpc_connectivity_state s) {
    return s == GRPC_CHANNEL_TRANSIENT_FAILURE || s == GRPC_CHANNEL_SHUTDOWN;
  };
  grpc_connectivity_state state = state_of(connection_, false);
  if (state == GRPC_CHANNEL_READY) return absl::OkStatus();
  if (state != GRPC_CHANNEL_IDLE && credentials_ != nullptr) {
    // Failed, or still connecting since an earlier attempt (a SYN lost to a partition is retried
    // seconds later): a fresh channel connects now. One still connecting is kept beside it, since
    // on a loaded machine its handshake may just be slow; whichever connects first is taken.
    previous_ = state == GRPC_CHANNEL_CONNECTING ? std::move(connection_) : nullptr;
    connection_ = std::make_unique<Connection>(MakeChannel(options_, credentials_));
  }
  const absl::Time deadline = absl::Now() + options_.connect_timeout;
  while (true) {
    state = state_of(connection_, true);
    if (state == GRPC_CHANNEL_READY) break;
    const grpc_connectivity_state previous = state_of(previous_, false);
    if (previous == GRPC_CHANNEL_READY) {
      connection_ = std::move(previous_);
      break;
    }
    if (failed(previous)) previous_.reset();
    if (failed(state)) {
      return absl::UnavailableError(
          absl::StrCat("no connection to ", options_.address, " (refused or unreachable)"));
    }
    const absl::Time now = absl::Now();
    if (now >= deadline) {
      return absl::UnavailableError(absl::StrCat("no connection to ", options_.address, " within ",
                                                 absl::FormatDuration(options_.connect_timeout)));
    }
    // Waiting polls, which moves both channels' connection attempts on; with two, in short slices.
    const absl::Time until =
        previous_ == nullptr ? deadline : std::min(deadline, now + absl::Milliseconds(20));
    connection_->channel->WaitForStateChange(state, absl::ToChronoTime(until));
  }
  previous_.reset();
  return absl::OkStatus();
}

template <typename Call>
absl::Status PsClient::WithRetries(const char* what, Call call) {
  Backoff backoff(options_.backoff);
  const absl::Time give_up = absl::Now() + options_.retry_for;
  absl::BitGen rng;
  while (true) {
    absl::Status status = Connect();
    if (status.ok()) status = call();
    // A busy server names its delay (RESOURCE_EXHAUSTED with a retry pushback): waited out, with up
    // to half again as jitter so that the agents it turned away do not come back together.
    const std::optional<absl::Duration> pushback = RetryAfter(status);
    if (status.code() != absl::StatusCode::kUnavailable && !pushback.has_value()) return status;
    absl::Duration delay = backoff.NextDelay();
    if (pushback.has_value()) {
      delay = std::max(delay, *pushback * absl::Uniform(rng, 1.0, 1.5));
    }
    if (absl::Now() + delay > give_up) {
      // Either way the server did not take the call: an outage to its caller.
      return absl::UnavailableError(absl::StrCat(what, " to ", options_.address, " failed for ",
                                                 absl::FormatDuration(options_.retry_for), ": ",
                                                 status.message()));
    }
    VLOG(1) << what << (pushback ? " refused, server busy" : " unavailable") << " ("
            << status.message() << "), retrying in " << delay;
    absl::SleepFor(delay);
  }
}

absl::StatusOr<v1::JoinResponse> PsClient::Join() {
  v1::JoinRequest request;
  request.set_agent_id(options_.agent_id);
  request.set_hostname(options_.hostname);
  request.set_agent_index(options_.agent_index);
  request.set_model_fingerprint(options_.model_fingerprint);
  request.set_num_shards(options_.num_shards);
  request.set_shard_index(options_.shard_index);
  request.set_shard_map_digest(options_.shard_map_digest);
  v1::JoinResponse response;
  absl::Status status = WithRetries("Join", [&] {
    grpc::ClientContext context;
    Prepare(&context, options_);
    return FromGrpcStatus(connection_->stub->Join(&context, request, &response));
  });
  if (!status.ok()) return status;
  return response;
}

namespace {

// No answer came: the server may or may not have applied the push.
bool Unanswered(const absl::Status& status) {
  return status.code() == absl::StatusCode::kUnavailable ||
         status.code() == absl::StatusCode::kDeadlineExceeded;
}

}  // namespace

absl::StatusOr<PushAnswer> PsClient::Push(const float* values, size_t count, uint64_t base_version,
                                          uint32_t minibatch_count, uint64_t base_incarnation) {
  return NextPush(values, count, base_version, minibatch_count, base_incarnation, nullptr);
}

PsClient::PushPull PsClient::PushThenPull(const float* values, size_t count, uint64_t base_version,
                                          uint32_t minibatch_count, uint64_t base_incarnation,
                                          uint64_t have_version, uint64_t have_incarnation,
                                          v1::Network network, std::vector<float>* out) {
  PushPull result;
  FollowingPull follow;
  follow.request = PullRequestFor(have_version, have_incarnation, network);
  result.pushed = NextPush(values, count, base_version, minibatch_count, base_incarnation, &follow);
  if (!result.pushed.ok()) {
    if (follow.reader != nullptr) {
      follow.context.TryCancel();  // The server would hold it for a push it may never decide.
      (void)follow.reader->Finish();
    }
    return result;
  }
  if (follow.reader != nullptr) {
    PullResult pulled;
    const absl::Status status = ReadPull(follow.context, *follow.reader, &pulled);
    if (status.ok()) {
      if (pulled.updated) out->swap(pull_buffer_);
      result.pulled = pulled;
      return result;
    }
    VLOG(1) << "the pull that followed push " << pushes_ << " failed (" << status
            << "); pulling again on its own";
  }
  result.pulled = Pull(have_version, have_incarnation, network, out);
  return result;
}

absl::StatusOr<PushAnswer> PsClient::NextPush(const float* values, size_t count,
                                              uint64_t base_version, uint32_t minibatch_count,
                                              uint64_t base_incarnation, FollowingPull* follow) {
  if (count == 0) return absl::InvalidArgumentError("nothing to push");
  const uint64_t sequence = ++pushes_;
  pending_.reset();  // A newer push supersedes it: the server would refuse it as SUPERSEDED now.
  absl::StatusOr<PushAnswer> result =
      SendPush(values, count, base_version, minibatch_count, base_incarnation, sequence, follow);
  if (!result.ok() && Unanswered(result.status())) {
    pending_ = PendingPush{std::vector<float>(values, values + count), base_version,
                           minibatch_count, base_incarnation, sequence};
  }
  return result;
}

absl::StatusOr<PushAnswer> PsClient::ResendPendingPush() {
  if (!pending_.has_value()) return absl::FailedPreconditionError("no push is pending");
  absl::StatusOr<PushAnswer> result =
      SendPush(pending_->values.data(), pending_->values.size(), pending_->base_version,
               pending_->minibatch_count, pending_->base_incarnation, pending_->sequence);
  if (result.ok() || !Unanswered(result.status())) pending_.reset();
  return result;
}

absl::StatusOr<PushAnswer> PsClient::SendPush(const float* values, size_t count,
                                              uint64_t base_version, uint32_t minibatch_count,
                                              uint64_t base_incarnation, uint64_t sequence,
                                              FollowingPull* follow) {
  const size_t per_chunk = ElementsPerChunk(options_.push_encoding);
  v1::PushResponse response;
  bool follow_sent = false;
  absl::Status status = WithRetries("Push", [&] {  // Every attempt is this one push.
    grpc::ClientContext context;
    Prepare(&context, options_);
    std::unique_ptr<grpc::ClientWriter<OutgoingChunk<v1::GradientChunk>>> writer(
        grpc::internal::ClientWriterFactory<OutgoingChunk<v1::GradientChunk>>::Create(
            connection_->channel.get(), connection_->push_method, &context, &response));
    OutgoingChunk<v1::GradientChunk> chunk;
    chunk.encoding = options_.push_encoding;
    v1::GradientChunk& header = chunk.header;
    header.set_agent_id(options_.agent_id);
    header.set_base_version(base_version);
    header.set_encoding(ToWireEncoding(options_.push_encoding));
    header.set_minibatch_count(minibatch_count);
    header.set_model_fingerprint(options_.model_fingerprint);
    header.set_total_elements(count);
    header.set_base_incarnation(base_incarnation);
    header.set_push_session(push_session_);
    header.set_sequence(sequence);
    bool sent = true;
    for (size_t offset = 0; offset < count; offset += per_chunk) {
      header.set_offset(offset);
      chunk.values = values + offset;
      chunk.count = std::min(per_chunk, count - offset);
      if (!writer->Write(chunk)) {  // The server answered early, or the deadline passed.
        sent = false;
        break;  // Finish() says why.
      }
      if (offset == 0) {
        // The header travels once; later chunks carry only offset and data.
        header.Clear();
      }
    }
    sent = writer->WritesDone() && sent;
    if (follow != nullptr && !follow_sent && sent) {
      // Only behind the first attempt (a context serves one call) that sent the whole push, and
      // within its deadline: a server that stops reading holds the exchange no longer than it held
      // a push.
      follow_sent = true;
      Prepare(&follow->context, options_);
      follow->context.set_deadline(context.deadline());
      follow->request.set_after_push_session(push_session_);
      follow->request.set_after_sequence(sequence);
      follow->reader.reset(
          grpc::internal::ClientReaderFactory<IncomingChunk<v1::WeightChunk>>::Create(
              connection_->channel.get(), connection_->pull_method, &follow->context,
              follow->request));
    }
    return FromGrpcCall(writer->Finish(), context);
  });
  if (!status.ok()) return status;
  return FromResponse(response);
}

v1::PullRequest PsClient::PullRequestFor(uint64_t have_version, uint64_t have_incarnation,
                                         v1::Network network) const {
  v1::PullRequest request;
  request.set_have_version(have_version);
  request.set_have_incarnation(have_incarnation);
  request.set_network(network);
  request.set_encoding(ToWireEncoding(options_.pull_encoding));
  request.set_agent_id(options_.agent_id);
  return request;
}

absl::Status PsClient::ReadPull(grpc::ClientContext& context,
                                grpc::ClientReader<IncomingChunk<v1::WeightChunk>>& reader,
                                PullResult* result) {
  IncomingChunk<v1::WeightChunk> incoming;
  const v1::WeightChunk& chunk = incoming.header();
  size_t received = 0;
  size_t total = 0;
  bool first = true;
  absl::Status bad;
  while (reader.Read(&incoming)) {
    if (first) {
      first = false;
      result->version = chunk.version();
      result->incarnation = chunk.incarnation();
      if (chunk.not_newer()) continue;
      total = chunk.total_elements();
      pull_buffer_.resize(total);
    }
    if (!bad.ok()) continue;
    if (chunk.version() != result->version || chunk.offset() != received) {
      bad =
          absl::DataLossError(absl::StrCat("pull stream out of order at offset ", chunk.offset()));
      continue;
    }
    const absl::StatusOr<TensorEncoding> encoding =
        FromWireEncoding(chunk.encoding(), UnspecifiedEncoding::kFp32);
    if (!encoding.ok()) {
      bad = encoding.status();
      continue;
    }
    size_t decoded = 0;
    bad = incoming.data().Decode(*encoding, pull_buffer_.data() + received, total - received,
                                 &decoded);
    received += decoded;
  }
  if (!incoming.parse_error().ok()) {
    context.TryCancel();  // The rest of the stream is of no use.
    (void)reader.Finish();
    return absl::DataLossError(absl::StrCat("pull stream: ", incoming.parse_error().message()));
  }
  absl::Status status = FromGrpcCall(reader.Finish(), context);
  if (!status.ok()) return status;
  if (!bad.ok()) return bad;
  if (first) return absl::DataLossError("pull stream carried no chunk");
  result->updated = total > 0;
  if (result->updated && received != total) {
    return absl::UnavailableError(
        absl::StrCat("pull stream ended after ", received, " of ", total, " elements"));
  }
  return absl::OkStatus();
}

absl::StatusOr<PullResult> PsClient::Pull(uint64_t have_version, uint64_t have_incarnation,
                                          v1::Network network, std::vector<float>* out) {
  const v1::PullRequest request = PullRequestFor(have_version, have_incarnation, network);
  PullResult result;
  absl::Status status = WithRetries("Pull", [&]() -> absl::Status {
    grpc::ClientContext context;
    Prepare(&context, options_);
    std::unique_ptr<grpc::ClientReader<IncomingChunk<v1::WeightChunk>>> reader(
        grpc::internal::ClientReaderFactory<IncomingChunk<v1::WeightChunk>>::Create(
            connection_->channel.get(), connection_->pull_method, &context, request));
    result = PullResult();
    return ReadPull(context, *reader, &result);
  });
  if (!status.ok()) return status;
  if (result.updated) out->swap(pull_buffer_);
  return result;
}

absl::StatusOr<v1::StatusResponse> PsClient::Status() {
  v1::StatusResponse response;
  absl::Status status = WithRetries("GetStatus", [&] {
    grpc::ClientContext context;
    Prepare(&context, options_);
    return FromGrpcStatus(connection_->stub->GetStatus(&context, v1::StatusRequest(), &response));
  });
  if (!status.ok()) return status;
  return response;
}

}  // namespace convoy::agent
