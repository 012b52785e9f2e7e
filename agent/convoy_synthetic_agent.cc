// convoy_synthetic_agent: drives a parameter server with synthetic gradients, to demonstrate and
// smoke-test a PS without simulators. Each agent descends f(w) = 0.5 * |w - w*|^2 (w* drawn from
// --target_seed, the same for every agent) with noisy gradients, and reports the loss as it falls;
// with --replayable it pushes gradients a checker can recompute (the chaos test replays a run with
// them). It syncs as a training agent does (agent/client/parameter_server_sync.h): a server that is
// away is ridden out by the same rejoin, with the push that got no answer resent.
#include <glog/logging.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "agent/client/client_security_settings.h"
#include "agent/client/parameter_server_sync.h"
#include "agent/client/ps_transport.h"
#include "agent/client/push_log.h"
#include "agent/client/synthetic_gradient.h"
#include "common/model/model_registry.h"
#include "common/settings/flag_ranges.h"
#include "common/settings/process_settings.h"
#include "common/settings/run_defaults.h"
#include "common/support/init.h"
#include "common/support/settings_table.h"
#include "common/support/status_macros.h"
#include "common/wire/tensor_encoding.h"

// convoy_synthetic_agent's own flags, a row each (common/support/settings_table.h); the settings
// other binaries take too are written through common/settings/process_settings.h.
#define CONVOY_SYNTHETIC_AGENT_SETTINGS(X)                                                        \
  CONVOY_PROCESS_SETTING(X, ps, "127.0.0.1:50051", "Parameter server address host:port.")         \
  CONVOY_PROCESS_SETTING(X, model, convoy::run_defaults::kServerModel,                            \
                         "Model the server runs (for the fingerprint).")                          \
  CONVOY_PROCESS_SETTING(X, agent_id, "", "Agent id; default synthetic-<pid>.")                   \
  CONVOY_PROCESS_SETTING(X, agent_index, 0, "Agent index (Ape-X epsilon).")                       \
  X(double, seconds, 30, "How long to push.")                                                     \
  X(uint64_t, target_seed, 7, "Seed of the optimum w* all agents descend towards.")               \
  X(double, noise, 0.1, "Standard deviation of the gradient noise.")                              \
  X(std::string, encoding, "fp32", "Push encoding: fp32 or bf16.")                                \
  CONVOY_PROCESS_SETTING(X, report_seconds, 2, "Seconds between progress lines.")                 \
  X(bool, replayable, false,                                                                      \
    "Push gradients that are a function of the push's (session, sequence) alone "                 \
    "(agent/client/synthetic_gradient.h), with the incarnation they were pulled from, so that a " \
    "run's applied pushes can be replayed.")                                                      \
  CONVOY_PROCESS_SETTING(                                                                         \
      X, push_log, "",                                                                            \
      "Append one line per answered push (session, sequence, accepted, incarnation, version; "    \
      "agent/client/push_log.h).")                                                                \
  X(absl::Duration, push_every, absl::ZeroDuration(), "Pause between pushes, e.g. 20ms.")         \
  X(absl::Duration, call_timeout, absl::Seconds(30), "Deadline of each call's attempt.")          \
  X(absl::Duration, retry_for, absl::Seconds(60),                                                 \
    "How long a call to a server that is away is retried before the agent rejoins.")              \
  X(absl::Duration, join_for, absl::Seconds(60),                                                  \
    "How long the first join waits for a server that is away or still starting (an agent "        \
    "started again may meet a partition before it has joined).")                                  \
  X(int, stall_after_chunks, 0,                                                                   \
    "Fault injection: send only this many chunks of the first push, print STALLED, then hang "    \
    "with the stream open (for tests that kill an agent in the middle of a push).")
CONVOY_SYNTHETIC_AGENT_SETTINGS(CONVOY_SETTING_FLAG)

// The settings this binary shares with others, as flags (common/support/settings_table.h).
CONVOY_SETTINGS_FLAGS(CONVOY_CLIENT_SECURITY_SETTINGS, convoy::agent::ClientSecuritySettings,
                      ClientSecuritySettingsFromFlags)

namespace convoy::agent {
namespace {

// Every numeric flag but --target_seed, which takes any value.
bool FlagsValid() {
  return FlagsInRange(
      "convoy_synthetic_agent",
      {UintRange("agent_index", absl::GetFlag(FLAGS_agent_index), 0, 65535),
       RealRange("seconds", absl::GetFlag(FLAGS_seconds), 0, kNoRealMax),
       RealRange("noise", absl::GetFlag(FLAGS_noise), 0, kNoRealMax),
       RealRange("report_seconds", absl::GetFlag(FLAGS_report_seconds), 0, kNoRealMax,
                 Ends::kOpenMin),
       IntRange("stall_after_chunks", absl::GetFlag(FLAGS_stall_after_chunks), 0, 1 << 20),
       DurationRange("push_every", absl::GetFlag(FLAGS_push_every), absl::ZeroDuration()),
       DurationRange("call_timeout", absl::GetFlag(FLAGS_call_timeout), absl::ZeroDuration(),
                     absl::InfiniteDuration(), Ends::kOpenMin),
       DurationRange("retry_for", absl::GetFlag(FLAGS_retry_for), absl::ZeroDuration()),
       DurationRange("join_for", absl::GetFlag(FLAGS_join_for), absl::ZeroDuration())});
}

// --stall_after_chunks: sends the first `stall` chunks of an n-element push on a stream of its own,
// prints STALLED and hangs with the stream open. Never returns.
[[noreturn]] void StallMidPush(const PsTransportOptions& options, size_t n, int stall) {
  absl::StatusOr<ModelInfo> model = DescribeModel(absl::GetFlag(FLAGS_model));
  CHECK(model.ok()) << model.status();  // The Join described it already.
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      MakeChannelCredentials(options.security);
  CHECK(credentials.ok()) << credentials.status();  // Checked by ClientSecurityFrom.
  grpc::ChannelArguments arguments;
  if (!options.security.tls_server_name.empty()) {
    arguments.SetSslTargetNameOverride(options.security.tls_server_name);
  }
  auto stub = v1::ParameterServer::NewStub(
      grpc::CreateCustomChannel(options.address, *credentials, arguments));
  grpc::ClientContext context;
  AddAuthToken(&context, options.security.auth_token);
  v1::PushResponse response;
  auto writer = stub->PushGradients(&context, &response);
  const std::vector<float> values(n, 0.01f);
  const size_t per_chunk = ElementsPerChunk(TensorEncoding::kFp32);
  for (int i = 0; i < stall && static_cast<size_t>(i) * per_chunk < n; ++i) {
    v1::GradientChunk chunk;
    if (i == 0) {
      chunk.set_agent_id(options.agent_id);
      chunk.set_encoding(v1::ENCODING_FP32);
      chunk.set_minibatch_count(1);
      chunk.set_model_fingerprint(model->fingerprint);
      chunk.set_total_elements(n);
    }
    chunk.set_offset(i * per_chunk);
    EncodeTensor(values.data() + i * per_chunk, std::min(per_chunk, n - i * per_chunk),
                 TensorEncoding::kFp32, chunk.mutable_data());
    writer->Write(chunk);
  }
  std::printf("STALLED\n");
  std::fflush(stdout);
  while (true) absl::SleepFor(absl::Hours(1));
}

// The synthetic descent as the sync's model: each "minibatch" is one gradient of f on the weights
// of the last pull, taken when a sync point pushes it. It learns nothing locally (StepLocal keeps
// nothing), so an outage costs pushes, never a gradient that was not computed for its push: with
// --replayable every push is the gradient of its own (session, sequence), which a checker can
// recompute.
class SyntheticModel final : public SyncedModel {
 public:
  SyntheticModel(size_t n, std::string agent_id, const PsTransport* transport)
      : transport_(transport),
        weights_(n),
        optimum_(n),
        noise_rng_(std::hash<std::string>()(agent_id)) {
    std::mt19937 target_rng(absl::GetFlag(FLAGS_target_seed));
    for (float& v : optimum_) v = 0.1f * unit_(target_rng);
  }

  void GetWeights(std::vector<float>* flat) override { *flat = weights_; }
  void SetWeights(const std::vector<float>& flat) override { weights_ = flat; }
  void SetTargetWeights(const std::vector<float>&) override {}
  bool TakeMeanGradient(std::vector<float>* gradient) override {
    gradient->resize(weights_.size());
    loss_ = 0;
    if (absl::GetFlag(FLAGS_replayable)) {
      // The push this gradient goes in is the transport's next: the sync pushes once per sync
      // point, and nothing learned locally joins it.
      ReplayableGradient(transport_->push_session(), transport_->next_sequence(), weights_.size(),
                         gradient->data());
      return true;
    }
    const float noise = static_cast<float>(absl::GetFlag(FLAGS_noise));
    for (size_t i = 0; i < weights_.size(); ++i) {
      const float d = weights_[i] - optimum_[i];
      loss_ += 0.5 * d * d;
      (*gradient)[i] = d + noise * unit_(noise_rng_);
    }
    return true;
  }
  bool StepLocal(std::vector<float>*) override { return false; }

  double loss() const { return loss_; }

 private:
  const PsTransport* const transport_;
  std::vector<float> weights_, optimum_;
  std::normal_distribution<float> unit_{0.f, 1.f};
  std::mt19937 noise_rng_;
  double loss_ = 0;
};

// One agent's descent: a gradient each sync point, pushed and pulled by the agent's own sync
// (ParameterServerSync, one push and pull per gradient), until --seconds run out. An outage is the
// sync's: the push that got no answer is resent on rejoin, paced, as a training agent does.
int Descend(PsTransport* transport, const std::string& agent_id, double epsilon) {
  SyntheticModel model(transport->end() - transport->begin(), agent_id, transport);
  SyncOptions options;
  options.agent_id = agent_id;
  options.push = PushMode::kGradients;
  options.batch_update_frequency = 1;
  options.sync_wait = absl::GetFlag(FLAGS_call_timeout);
  ParameterServerSync sync({transport}, &model, options, epsilon);
  const absl::Duration push_every = absl::GetFlag(FLAGS_push_every);
  const absl::Time start = absl::Now();
  const absl::Time end = start + absl::Seconds(absl::GetFlag(FLAGS_seconds));
  absl::Time next_report = start;
  uint64_t outages = 0;
  bool was_in_step = sync.state() == SyncState::kInStep;
  while (absl::Now() < end) {
    sync.Trained();  // A sync point: push this gradient and pull.
    while (sync.TrainingWaits()) sync.WaitForAnswer();
    sync.Poll();
    const bool in_step = sync.state() == SyncState::kInStep;
    if (was_in_step && !in_step) ++outages;
    was_in_step = in_step;
    if (absl::Now() >= next_report) {
      const SyncStats stats = sync.stats();
      std::printf(
          "%s  t=%5.1fs  version=%-7llu  loss=%.4f  pushes=%llu  rejected=%llu  epsilon=%.3f\n",
          agent_id.c_str(), absl::ToDoubleSeconds(absl::Now() - start),
          static_cast<unsigned long long>(sync.version()), model.loss(),
          static_cast<unsigned long long>(stats.pushes),
          static_cast<unsigned long long>(stats.pushes_rejected), sync.epsilon());
      std::fflush(stdout);
      next_report += absl::Seconds(absl::GetFlag(FLAGS_report_seconds));
    }
    if (!in_step) {
      absl::SleepFor(absl::Milliseconds(10));  // Away: the sync paces the rejoin attempts.
    } else if (push_every > absl::ZeroDuration()) {
      absl::SleepFor(push_every);
    }
  }
  sync.AwaitExchange();  // The push in flight gets its answer (its calls have deadlines).
  const SyncStats stats = sync.stats();
  std::printf(
      "%s  done: %llu pushes (%llu rejected), %llu outages ridden out, final loss %.4f at "
      "version %llu\n",
      agent_id.c_str(), static_cast<unsigned long long>(stats.pushes),
      static_cast<unsigned long long>(stats.pushes_rejected),
      static_cast<unsigned long long>(outages), model.loss(),
      static_cast<unsigned long long>(sync.version()));
  return 0;
}

int Run() {
  if (!FlagsValid()) return kExitUsage;
  // An unknown encoding is a usage error, as an out-of-range number is.
  absl::StatusOr<TensorEncoding> encoding =
      ParseTensorEncoding("encoding", absl::GetFlag(FLAGS_encoding));
  if (!encoding.ok()) {
    std::fprintf(stderr, "convoy_synthetic_agent: %s\n",
                 std::string(encoding.status().message()).c_str());
    return kExitUsage;
  }
  absl::StatusOr<ClientSecurity> security = ClientSecurityFrom(ClientSecuritySettingsFromFlags());
  if (!security.ok()) {
    LOG(ERROR) << security.status();
    return 2;
  }
  std::string agent_id = absl::GetFlag(FLAGS_agent_id);
  if (agent_id.empty()) agent_id = absl::StrCat("synthetic-", getpid());
  PsTransportOptions options;
  options.address = absl::GetFlag(FLAGS_ps);
  options.agent_id = agent_id;
  options.agent_index = absl::GetFlag(FLAGS_agent_index);
  options.push_encoding = *encoding;
  options.security = *security;
  options.call_timeout = absl::GetFlag(FLAGS_call_timeout);
  options.join_for = absl::GetFlag(FLAGS_join_for);
  options.retry_while_training = absl::GetFlag(FLAGS_retry_for);
  std::shared_ptr<PushLog> push_log;
  if (const std::string path = absl::GetFlag(FLAGS_push_log); !path.empty()) {
    absl::StatusOr<std::unique_ptr<PushLog>> opened = PushLog::Open(path);
    if (!opened.ok()) {
      LOG(ERROR) << "--push_log: " << opened.status().message();
      return 2;
    }
    push_log = *std::move(opened);
  }
  absl::StatusOr<std::unique_ptr<PsTransport>> transport = PsTransport::Create(options, push_log);
  if (!transport.ok()) {
    LOG(ERROR) << transport.status();
    return 2;
  }
  JoinOptions join;
  join.model = absl::GetFlag(FLAGS_model);
  join.model_pinned = true;  // The model whose fingerprint the pushes carry.
  absl::StatusOr<JoinResult> joined = (*transport)->Join(kDefaultNumActions, join);
  if (!joined.ok()) {
    LOG(ERROR) << "join failed: " << joined.status();
    return 1;
  }
  if (const int stall = absl::GetFlag(FLAGS_stall_after_chunks); stall > 0) {
    StallMidPush(options, (*transport)->end() - (*transport)->begin(), stall);
  }
  return Descend(transport->get(), agent_id, joined->epsilon);
}

}  // namespace
}  // namespace convoy::agent

int main(int argc, char** argv) {
  convoy::InitProcess(argc, argv,
                      "convoy_synthetic_agent: pushes synthetic gradients to a convoy_ps.\n"
                      "Usage: convoy_synthetic_agent --ps=host:port [--seconds=30]");
  return convoy::agent::Run();
}
