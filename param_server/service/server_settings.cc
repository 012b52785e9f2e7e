#include "param_server/service/server_settings.h"

#include <type_traits>

namespace convoy::ps {
namespace {

// A setting's range as SettingRange has it; an enum (the optimizer, parsed by its flag) takes any
// value its flag parses.
template <typename T, typename Min, typename Max>
FlagRange ServerSettingRange(absl::string_view name, const T& value, Min min, Max max, Ends ends) {
  if constexpr (std::is_enum_v<T>) {
    return FlagRange{std::string(name), "", "", true};
  } else {
    return SettingRange(name, value, min, max, ends);
  }
}

}  // namespace

const ParameterServerOptions& ServerDefaults() {
  static const ParameterServerOptions* const defaults = new ParameterServerOptions();
  return *defaults;
}

std::vector<FlagRange> ServerSettingRanges(const ServerSettings& settings) {
  std::vector<FlagRange> ranges;
#define CONVOY_SERVER_SETTING_RANGE(type, name, def, min, max, ends, help) \
  ranges.push_back(ServerSettingRange(#name, settings.name, min, max, Ends::ends));
  CONVOY_SERVER_SETTINGS(CONVOY_SERVER_SETTING_RANGE)
#undef CONVOY_SERVER_SETTING_RANGE
  return ranges;
}

ParameterServerOptions ServerOptionsFrom(const ServerSettings& settings, const RunSettings& run,
                                         ExplorationMode exploration) {
  ParameterServerOptions o;
  o.model = settings.model;
  o.num_actions = settings.num_actions;
  o.seed = settings.seed;
  o.init_checkpoint = settings.init_checkpoint;
  o.checkpoint_dir = settings.checkpoint_dir;
  o.resume = settings.resume;
  o.keep_checkpoints = settings.keep_checkpoints;
  o.checkpoint_every_updates = settings.checkpoint_every_updates;
  o.checkpoint_every = absl::Seconds(settings.checkpoint_every_seconds);
  o.optimizer.kind = settings.optimizer;
  o.optimizer.beta1 = settings.beta1;
  o.optimizer.beta2 = settings.beta2;
  o.optimizer.eps = settings.eps;
  o.optimizer.weight_decay = settings.weight_decay;
  o.optimizer.momentum = settings.momentum;
  o.optimizer.rmsprop_alpha = settings.rmsprop_alpha;
  o.optimizer.max_grad_norm = settings.max_grad_norm;
  o.max_staleness = settings.max_staleness;
  o.staleness_lr_scaling = settings.staleness_lr_scaling;
  o.average_horizon = settings.average_horizon;
  o.average_every = absl::Seconds(settings.average_every_seconds);
  o.exploration.mode = exploration;
  o.exploration.start_epsilon = settings.start_epsilon;
  o.exploration.apex_base_epsilon = settings.apex_base_epsilon;
  o.exploration.apex_alpha = settings.apex_alpha;
  o.exploration.apex_num_agents = settings.apex_num_agents;
  static_cast<RunSettings&>(o) = run;
  o.apply_log = settings.apply_log;
  o.num_shards = settings.num_shards;
  o.shard_index = settings.shard_index;
  o.max_pushes_per_step = settings.max_pushes_per_step;
  o.apply_threads = settings.apply_threads;
  return o;
}

ServiceOptions ServiceOptionsFrom(const ServerSettings& settings) {
  ServiceOptions service;
  service.stream_idle_timeout = absl::Seconds(settings.stream_idle_timeout_seconds);
  service.push_buffers = settings.push_buffers;
  service.max_waiting_pushes = settings.max_waiting_pushes;
  service.concurrent_pulls = settings.concurrent_pulls;
  service.max_waiting_pulls = settings.max_waiting_pulls;
  service.busy_retry_after = absl::Milliseconds(settings.busy_retry_after_ms);
  service.receive_window_bytes = settings.receive_window_kib << 10;
  return service;
}

absl::StatusOr<ServerSecurity> ServerSecurityFrom(const ServerSettings& settings) {
  absl::StatusOr<std::string> token = ReadAuthToken(settings.auth_token_file);
  if (!token.ok()) return token.status();
  ServerSecurity security;
  security.tls_cert_file = settings.tls_cert;
  security.tls_key_file = settings.tls_key;
  security.tls_client_ca_file = settings.tls_client_ca;
  security.auth_token = *token;
  security.insecure = settings.insecure;
  security.health_without_auth = settings.health_without_auth;
  // (Plaintext has nothing to check, and its warning comes once, from the server's start.)
  const bool plaintext =
      security.insecure && security.tls_cert_file.empty() && security.tls_key_file.empty();
  if (!plaintext) {
    if (absl::Status checked = MakeServerCredentials(security).status(); !checked.ok()) {
      return checked;
    }
  }
  return security;
}

}  // namespace convoy::ps
