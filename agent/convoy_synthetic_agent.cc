// convoy_synthetic_agent: drives a parameter server with synthetic gradients, to demonstrate and
// smoke-test a PS without simulators. Each agent descends f(w) = 0.5 * |w - w*|^2 (w* drawn from
// --target_seed, the same for every agent) with noisy gradients, and reports the loss as it falls;
// with --replayable it pushes gradients a checker can recompute (the chaos test replays a run with
// them). It rides out a server that is away: it rejoins and resends a push that got no answer.
#include <glog/logging.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "agent/client_security_flags.h"
#include "agent/ps_client.h"
#include "agent/synthetic_gradient.h"
#include "common/flag_ranges.h"
#include "common/init.h"
#include "common/model_registry.h"
#include "common/run_defaults.h"
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
          "Append one line per answered push (session, sequence, accepted, incarnation, version).");
ABSL_FLAG(absl::Duration, push_every, absl::ZeroDuration(), "Pause between pushes, e.g. 20ms.");
ABSL_FLAG(absl::Duration, call_timeout, absl::Seconds(30), "Deadline of each call's attempt.");
ABSL_FLAG(absl::Duration, retry_for, absl::Seconds(60),
          "How long a call to a server that is away is retried before the agent rejoins.");
ABSL_FLAG(int, stall_after_chunks, 0,
          "Fault injection: send only this many chunks of the first push, print STALLED, then hang "
          "with the stream open (for tests that kill an agent in the middle of a push).");

namespace convoy {
namespace {

int Run() {
  // Every numeric flag but --target_seed, which takes any value.
  if (!FlagsInRange(
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
           DurationRange("retry_for", absl::GetFlag(FLAGS_retry_for), absl::ZeroDuration())})) {
    return kExitUsage;
  }
  // An unknown encoding is a usage error, as an out-of-range number is.
  absl::StatusOr<TensorEncoding> encoding =
      ParseTensorEncoding("encoding", absl::GetFlag(FLAGS_encoding));
  if (!encoding.ok()) {
    std::fprintf(stderr, "convoy_synthetic_agent: %s\n",
                 std::string(encoding.status().message()).c_str());
    return kExitUsage;
  }
  absl::StatusOr<ModelInfo> model = DescribeModel(absl::GetFlag(FLAGS_model));
  if (!model.ok()) {
    LOG(ERROR) << model.status();
    return 2;
  }
  absl::StatusOr<ClientSecurity> security = ClientSecurityFromFlags();
  if (!security.ok()) {
    LOG(ERROR) << security.status();
    return 2;
  }
  PsClientOptions options;
  options.security = *security;
  options.address = absl::GetFlag(FLAGS_ps);
  options.agent_id = absl::GetFlag(FLAGS_agent_id);
  if (options.agent_id.empty()) options.agent_id = absl::StrCat("synthetic-", getpid());
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  options.hostname = host;
  options.agent_index = absl::GetFlag(FLAGS_agent_index);
  options.model_fingerprint = model->fingerprint;
  options.call_timeout = absl::GetFlag(FLAGS_call_timeout);
  options.retry_for = absl::GetFlag(FLAGS_retry_for);
  options.push_encoding = *encoding;
  absl::StatusOr<std::unique_ptr<PsClient>> created = PsClient::Create(options);
  if (!created.ok()) {
    LOG(ERROR) << created.status();
    return 2;
  }
  PsClient& client = **created;
  absl::StatusOr<v1::JoinResponse> joined = client.Join();
  if (!joined.ok()) {
    LOG(ERROR) << "join failed: " << joined.status();
    return 1;
  }
  const size_t n = joined->parameter_count();
  if (const int stall = absl::GetFlag(FLAGS_stall_after_chunks); stall > 0) {
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
  std::mt19937 target_rng(absl::GetFlag(FLAGS_target_seed));
  std::normal_distribution<float> unit(0.f, 1.f);
  std::vector<float> optimum(n);
  for (float& v : optimum) v = 0.1f * unit(target_rng);
  std::mt19937 noise_rng(std::hash<std::string>()(options.agent_id));
  const float noise = static_cast<float>(absl::GetFlag(FLAGS_noise));
  const bool replayable = absl::GetFlag(FLAGS_replayable);
  const absl::Duration push_every = absl::GetFlag(FLAGS_push_every);
  FILE* push_log = nullptr;
  if (const std::string path = absl::GetFlag(FLAGS_push_log); !path.empty()) {
    push_log = std::fopen(path.c_str(), "a");
    if (push_log == nullptr) {
      LOG(ERROR) << "--push_log: cannot open " << path;
      return 2;
    }
  }
  // One line per answered push; flushed, so a killed agent leaves every answer it saw.
  auto log_answer = [&](uint64_t sequence, const PushResult& r) {
    if (push_log == nullptr) return;
    std::fprintf(push_log,
                 "push agent=%s session=%llu sequence=%llu accepted=%d repeated=%d reason=%s "
                 "incarnation=%llu version=%llu\n",
                 options.agent_id.c_str(), static_cast<unsigned long long>(client.push_session()),
                 static_cast<unsigned long long>(sequence), r.accepted ? 1 : 0, r.repeated ? 1 : 0,
                 v1::RejectReason_Name(r.reason).c_str(),
                 static_cast<unsigned long long>(r.incarnation),
                 static_cast<unsigned long long>(r.version));
    std::fflush(push_log);
  };

  std::vector<float> weights, gradient(n);
  uint64_t version = 0, incarnation = 0, pushes = 0, rejected = 0, outages = 0;
  uint64_t pending_sequence = 0;
  const absl::Time end = absl::Now() + absl::Seconds(absl::GetFlag(FLAGS_seconds));
  // The server is away (down, restarting, cut off): join again until it answers, and resend the
  // push that got no answer under its number, so it is applied once either way. False when the run's
  // time ran out first, or on an error that waiting does not cure.
  auto ride_out = [&](const absl::Status& why) {
    ++outages;
    LOG(WARNING) << options.agent_id << ": parameter server away (" << why << "); rejoining";
    while (absl::Now() < end) {
      absl::StatusOr<v1::JoinResponse> joined = client.Join();
      if (!joined.ok()) {
        if (!absl::IsUnavailable(joined.status()) && !absl::IsDeadlineExceeded(joined.status())) {
          LOG(ERROR) << "join failed: " << joined.status();
          return false;
        }
        continue;  // Join retried for --retry_for already.
      }
      if (!client.has_pending_push()) return true;
      absl::StatusOr<PushResult> resent = client.ResendPendingPush();
      if (resent.ok()) log_answer(pending_sequence, *resent);
      if (!client.has_pending_push()) return true;
    }
    return false;
  };
  absl::Time next_report = absl::Now();
  const absl::Time start = absl::Now();
  double loss = 0;
  while (absl::Now() < end) {
    absl::StatusOr<PullResult> pulled =
        client.Pull(version, incarnation, v1::NETWORK_ONLINE, &weights);
    if (!pulled.ok()) {
      if (absl::IsUnavailable(pulled.status()) || absl::IsDeadlineExceeded(pulled.status())) {
        if (!ride_out(pulled.status())) break;
        continue;
      }
      LOG(ERROR) << "pull failed: " << pulled.status();
      return 1;
    }
    version = pulled->version;
    incarnation = pulled->incarnation;
    const uint64_t sequence = client.next_sequence();
    loss = 0;
    if (replayable) {
      ReplayableGradient(client.push_session(), sequence, n, gradient.data());
    } else {
      for (size_t i = 0; i < n; ++i) {
        const float d = weights[i] - optimum[i];
        loss += 0.5 * d * d;
        gradient[i] = d + noise * unit(noise_rng);
      }
    }
    absl::StatusOr<PushResult> pushed =
        client.Push(gradient.data(), n, version, 1, replayable ? incarnation : 0);
    if (!pushed.ok()) {
      if (client.has_pending_push()) {
        pending_sequence = sequence;
        if (!ride_out(pushed.status())) break;
        continue;
      }
      LOG(ERROR) << "push failed: " << pushed.status();
      return 1;
    }
    log_answer(sequence, *pushed);
    ++pushes;
    if (!pushed->accepted) ++rejected;
    if (absl::Now() >= next_report) {
      std::printf(
          "%s  t=%5.1fs  version=%-7llu  loss=%.4f  pushes=%llu  rejected=%llu  epsilon=%.3f\n",
          options.agent_id.c_str(), absl::ToDoubleSeconds(absl::Now() - start),
          static_cast<unsigned long long>(pushed->version), loss,
          static_cast<unsigned long long>(pushes), static_cast<unsigned long long>(rejected),
          pushed->epsilon);
      std::fflush(stdout);
      next_report += absl::Seconds(absl::GetFlag(FLAGS_report_seconds));
    }
    if (push_every > absl::ZeroDuration()) absl::SleepFor(push_every);
  }
  std::printf("%s  done: %llu pushes (%llu rejected), %llu outages ridden out, final loss %.4f at "
              "version %llu\n",
              options.agent_id.c_str(), static_cast<unsigned long long>(pushes),
              static_cast<unsigned long long>(rejected), static_cast<unsigned long long>(outages),
              loss, static_cast<unsigned long long>(version));
  if (push_log != nullptr) std::fclose(push_log);
  return 0;
}

}  // namespace
}  // namespace convoy

int main(int argc, char** argv) {
  convoy::InitProcess(argc, argv,
                      "convoy_synthetic_agent: pushes synthetic gradients to a convoy_ps.\n"
                      "Usage: convoy_synthetic_agent --ps=host:port [--seconds=30]");
  return convoy::Run();
}
