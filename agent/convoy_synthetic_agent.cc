// convoy_synthetic_agent: drives a parameter server with synthetic gradients, to demonstrate and
// smoke-test a PS without simulators. Each agent descends f(w) = 0.5 * |w - w*|^2 (w* drawn from
// --target_seed, the same for every agent) with noisy gradients, and reports the loss as it falls.
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
           IntRange("stall_after_chunks", absl::GetFlag(FLAGS_stall_after_chunks), 0, 1 << 20)})) {
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
  options.push_encoding =
      absl::GetFlag(FLAGS_encoding) == "bf16" ? TensorEncoding::kBf16 : TensorEncoding::kFp32;
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

  std::vector<float> weights, gradient(n);
  uint64_t version = 0, incarnation = 0, pushes = 0, rejected = 0;
  const absl::Time end = absl::Now() + absl::Seconds(absl::GetFlag(FLAGS_seconds));
  absl::Time next_report = absl::Now();
  const absl::Time start = absl::Now();
  double loss = 0;
  while (absl::Now() < end) {
    absl::StatusOr<PullResult> pulled =
        client.Pull(version, incarnation, v1::NETWORK_ONLINE, &weights);
    if (!pulled.ok()) {
      LOG(ERROR) << "pull failed: " << pulled.status();
      return 1;
    }
    version = pulled->version;
    incarnation = pulled->incarnation;
    loss = 0;
    for (size_t i = 0; i < n; ++i) {
      const float d = weights[i] - optimum[i];
      loss += 0.5 * d * d;
      gradient[i] = d + noise * unit(noise_rng);
    }
    absl::StatusOr<PushResult> pushed = client.Push(gradient.data(), n, version, 1);
    if (!pushed.ok()) {
      LOG(ERROR) << "push failed: " << pushed.status();
      return 1;
    }
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
  }
  std::printf("%s  done: %llu pushes (%llu rejected), final loss %.4f at version %llu\n",
              options.agent_id.c_str(), static_cast<unsigned long long>(pushes),
              static_cast<unsigned long long>(rejected), loss,
              static_cast<unsigned long long>(version));
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
