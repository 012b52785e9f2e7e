// convoy_synthetic_agent: drives a parameter server with synthetic gradients, to demonstrate and
// smoke-test a PS without simulators. Each agent descends f(w) = 0.5 * |w - w*|^2 (w* drawn from
// --target_seed, the same for every agent) with noisy gradients, and reports the loss as it falls;
// with --replayable it pushes gradients a checker can recompute (the chaos test replays a run with
// them). It rides out a server that is away: it rejoins and resends a push that got no answer.
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
#include "agent/client_security_flags.h"
#include "agent/ps_client.h"
#include "agent/push_log.h"
#include "agent/synthetic_gradient.h"
#include "common/flag_ranges.h"
#include "common/init.h"
#include "common/model_registry.h"
#include "common/run_defaults.h"
#include "common/status_macros.h"
#include "common/tensor_encoding.h"

ABSL_FLAG(std::string, ps, "127.0.0.1:50051", "Parameter server address host:port.");
ABSL_FLAG(std::string, model, convoy::run_defaults::kServerModel,
          "Model the server runs (for the fingerprint).");
ABSL_FLAG(std::string, agent_id, "", "Agent id; default synthetic-<pid>.");
ABSL_FLAG(uint32_t, agent_index, 0, "Agent index (Ape-X epsilon).");
ABSL_FLAG(double, seconds, 30, "How long to push.");
ABSL_FLAG(uint64_t, target_seed, 7, "Seed of the optimum w* all agents descend towards.");
ABSL_FLAG(double, noise, 0.1, "Standard deviation of the gradient noise.");
ABSL_FLAG(std::string, encoding, "fp32", "Push encoding: fp32 or bf16.");
ABSL_FLAG(double, report_seconds, 2, "Seconds between progress lines.");
ABSL_FLAG(bool, replayable, false,
          "Push gradients that are a function of the push's (session, sequence) alone "
          "(agent/synthetic_gradient.h), with the incarnation they were pulled from, so that a "
          "run's applied pushes can be replayed.");
ABSL_FLAG(std::string, push_log, "",
          "Append one line per answered push (session, sequence, accepted, incarnation, version; "
          "agent/push_log.h).");
ABSL_FLAG(absl::Duration, push_every, absl::ZeroDuration(), "Pause between pushes, e.g. 20ms.");
ABSL_FLAG(absl::Duration, call_timeout, absl::Seconds(30), "Deadline of each call's attempt.");
ABSL_FLAG(absl::Duration, retry_for, absl::Seconds(60),
          "How long a call to a server that is away is retried before the agent rejoins.");
ABSL_FLAG(absl::Duration, join_for, absl::Seconds(60),
          "How long the first join waits for a server that is away or still starting (an agent "
          "started again may meet a partition before it has joined).");
ABSL_FLAG(int, stall_after_chunks, 0,
          "Fault injection: send only this many chunks of the first push, print STALLED, then hang "
          "with the stream open (for tests that kill an agent in the middle of a push).");

namespace convoy {
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

// The client's options from the flags. Errors: the model's and the credentials'.
absl::StatusOr<PsClientOptions> ClientOptionsFromFlags(TensorEncoding encoding) {
  CONVOY_ASSIGN_OR_RETURN(ModelInfo model, DescribeModel(absl::GetFlag(FLAGS_model)));
  CONVOY_ASSIGN_OR_RETURN(ClientSecurity security, ClientSecurityFromFlags());
  PsClientOptions options;
  options.security = std::move(security);
  options.address = absl::GetFlag(FLAGS_ps);
  options.agent_id = absl::GetFlag(FLAGS_agent_id);
  if (options.agent_id.empty()) options.agent_id = absl::StrCat("synthetic-", getpid());
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  options.hostname = host;
  options.agent_index = absl::GetFlag(FLAGS_agent_index);
  options.model_fingerprint = model.fingerprint;
  options.call_timeout = absl::GetFlag(FLAGS_call_timeout);
  options.retry_for = absl::GetFlag(FLAGS_retry_for);
  options.push_encoding = encoding;
  return options;
}

// --stall_after_chunks: sends the first `stall` chunks of an n-element push on a stream of its own,
// prints STALLED and hangs with the stream open. Never returns.
[[noreturn]] void StallMidPush(const PsClientOptions& options, size_t n, int stall) {
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      MakeChannelCredentials(options.security);
  CHECK(credentials.ok()) << credentials.status();  // Checked by ClientSecurityFromFlags.
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
      chunk.set_model_fingerprint(options.model_fingerprint);
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

// One agent's descent: pull, compute a gradient, push, until --seconds run out.
class SyntheticDescent {
 public:
  SyntheticDescent(PsClient* client, std::string agent_id, size_t n, PushLog* push_log)
      : client_(*client),
        agent_id_(std::move(agent_id)),
        n_(n),
        push_log_(push_log),
        optimum_(n),
        gradient_(n),
        noise_rng_(std::hash<std::string>()(agent_id_)),
        end_(absl::Now() + absl::Seconds(absl::GetFlag(FLAGS_seconds))) {
    std::mt19937 target_rng(absl::GetFlag(FLAGS_target_seed));
    for (float& v : optimum_) v = 0.1f * unit_(target_rng);
  }

  // The process's exit code: 0 when the time ran out (an outage that outlasted it, or a rejoin
  // refused, included), 1 when a pull or push failed in a way waiting does not cure.
  int Run() {
    const absl::Duration push_every = absl::GetFlag(FLAGS_push_every);
    next_report_ = start_ = absl::Now();
    while (absl::Now() < end_) {
      const Next next = Cycle();
      if (next == Next::kFail) return 1;
      if (next == Next::kStop) break;
      if (next == Next::kAgain) continue;
      if (push_every > absl::ZeroDuration()) absl::SleepFor(push_every);
    }
    std::printf(
        "%s  done: %llu pushes (%llu rejected), %llu outages ridden out, final loss %.4f at "
        "version %llu\n",
        agent_id_.c_str(), static_cast<unsigned long long>(pushes_),
        static_cast<unsigned long long>(rejected_), static_cast<unsigned long long>(outages_),
        loss_, static_cast<unsigned long long>(version_));
    return 0;
  }

 private:
  enum class Next {
    kGoOn,   // Cycle again, after --push_every.
    kAgain,  // Cycle again at once: the server is back after an outage.
    kStop,   // An outage outlasted the run, or a rejoin was refused: report and end.
    kFail,   // A pull or push failed in a way waiting does not cure (logged).
  };

  // One pull and push.
  Next Cycle() {
    absl::StatusOr<PullResult> pulled =
        client_.Pull(version_, incarnation_, v1::NETWORK_ONLINE, &weights_);
    if (!pulled.ok()) {
      if (absl::IsUnavailable(pulled.status()) || absl::IsDeadlineExceeded(pulled.status())) {
        return RideOut(pulled.status());
      }
      LOG(ERROR) << "pull failed: " << pulled.status();
      return Next::kFail;
    }
    version_ = pulled->version;
    incarnation_ = pulled->incarnation;
    const uint64_t sequence = client_.next_sequence();
    ComputeGradient(sequence);
    const bool replayable = absl::GetFlag(FLAGS_replayable);
    absl::StatusOr<PushAnswer> pushed =
        client_.Push(gradient_.data(), n_, version_, 1, replayable ? incarnation_ : 0);
    if (!pushed.ok()) {
      if (client_.has_pending_push()) {
        pending_sequence_ = sequence;
        return RideOut(pushed.status());
      }
      LOG(ERROR) << "push failed: " << pushed.status();
      return Next::kFail;
    }
    LogAnswer(sequence, *pushed);
    ++pushes_;
    if (!pushed->accepted) ++rejected_;
    if (absl::Now() >= next_report_) Report(*pushed);
    return Next::kGoOn;
  }

  void ComputeGradient(uint64_t sequence) {
    loss_ = 0;
    if (absl::GetFlag(FLAGS_replayable)) {
      ReplayableGradient(client_.push_session(), sequence, n_, gradient_.data());
      return;
    }
    const float noise = static_cast<float>(absl::GetFlag(FLAGS_noise));
    for (size_t i = 0; i < n_; ++i) {
      const float d = weights_[i] - optimum_[i];
      loss_ += 0.5 * d * d;
      gradient_[i] = d + noise * unit_(noise_rng_);
    }
  }

  // The server is away (down, restarting, cut off): join again until it answers, and resend the
  // push that got no answer under its number, so it is applied once either way. kStop when the
  // run's time ran out first, or on a join error that waiting does not cure.
  Next RideOut(const absl::Status& why) {
    ++outages_;
    LOG(WARNING) << agent_id_ << ": parameter server away (" << why << "); rejoining";
    while (absl::Now() < end_) {
      absl::StatusOr<v1::JoinResponse> joined = client_.Join();
      if (!joined.ok()) {
        if (!absl::IsUnavailable(joined.status()) && !absl::IsDeadlineExceeded(joined.status())) {
          LOG(ERROR) << "join failed: " << joined.status();
          return Next::kStop;
        }
        continue;  // Join retried for --retry_for already.
      }
      if (!client_.has_pending_push()) return Next::kAgain;
      absl::StatusOr<PushAnswer> resent = client_.ResendPendingPush();
      if (resent.ok()) LogAnswer(pending_sequence_, *resent);
      if (!client_.has_pending_push()) return Next::kAgain;
    }
    return Next::kStop;
  }

  void LogAnswer(uint64_t sequence, const PushAnswer& r) {
    if (push_log_ != nullptr) {
      push_log_->Answered({agent_id_, client_.push_session(), sequence, /*shard=*/0,
                           /*minibatches=*/1},
                          r);
    }
  }

  void Report(const PushAnswer& pushed) {
    std::printf(
        "%s  t=%5.1fs  version=%-7llu  loss=%.4f  pushes=%llu  rejected=%llu  epsilon=%.3f\n",
        agent_id_.c_str(), absl::ToDoubleSeconds(absl::Now() - start_),
        static_cast<unsigned long long>(pushed.version), loss_,
        static_cast<unsigned long long>(pushes_), static_cast<unsigned long long>(rejected_),
        pushed.epsilon);
    std::fflush(stdout);
    next_report_ += absl::Seconds(absl::GetFlag(FLAGS_report_seconds));
  }

  PsClient& client_;
  const std::string agent_id_;
  const size_t n_;
  PushLog* const push_log_;  // Null without --push_log.
  std::vector<float> optimum_, weights_, gradient_;
  std::normal_distribution<float> unit_{0.f, 1.f};
  std::mt19937 noise_rng_;
  const absl::Time end_;
  absl::Time start_, next_report_;
  uint64_t version_ = 0, incarnation_ = 0, pushes_ = 0, rejected_ = 0, outages_ = 0;
  uint64_t pending_sequence_ = 0;
  double loss_ = 0;
};

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
  absl::StatusOr<PsClientOptions> options = ClientOptionsFromFlags(*encoding);
  if (!options.ok()) {
    LOG(ERROR) << options.status();
    return 2;
  }
  absl::StatusOr<std::unique_ptr<PsClient>> client = PsClient::Create(*options);
  if (!client.ok()) {
    LOG(ERROR) << client.status();
    return 2;
  }
  // Each Join retries for --retry_for; the first is tried again until --join_for has passed, as
  // long as the server is only away.
  const absl::Time join_until = absl::Now() + absl::GetFlag(FLAGS_join_for);
  absl::StatusOr<v1::JoinResponse> joined = (*client)->Join();
  while (!joined.ok() &&
         (absl::IsUnavailable(joined.status()) || absl::IsDeadlineExceeded(joined.status())) &&
         absl::Now() < join_until) {
    LOG(WARNING) << options->agent_id << ": waiting to join (" << joined.status() << ")";
    joined = (*client)->Join();
  }
  if (!joined.ok()) {
    LOG(ERROR) << "join failed: " << joined.status();
    return 1;
  }
  const size_t n = joined->parameter_count();
  if (const int stall = absl::GetFlag(FLAGS_stall_after_chunks); stall > 0) {
    StallMidPush(*options, n, stall);
  }
  std::unique_ptr<PushLog> push_log;
  if (const std::string path = absl::GetFlag(FLAGS_push_log); !path.empty()) {
    absl::StatusOr<std::unique_ptr<PushLog>> opened = PushLog::Open(path);
    if (!opened.ok()) {
      LOG(ERROR) << "--push_log: " << opened.status().message();
      return 2;
    }
    push_log = *std::move(opened);
  }
  SyntheticDescent descent(client->get(), options->agent_id, n, push_log.get());
  return descent.Run();
}

}  // namespace
}  // namespace convoy

int main(int argc, char** argv) {
  convoy::InitProcess(argc, argv,
                      "convoy_synthetic_agent: pushes synthetic gradients to a convoy_ps.\n"
                      "Usage: convoy_synthetic_agent --ps=host:port [--seconds=30]");
  return convoy::Run();
}
