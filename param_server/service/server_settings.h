// The parameter server's own settings, declared once, in CONVOY_SERVER_SETTINGS below, beside the
// options they become: the core's (ParameterServerOptions, with the run settings of
// common/settings/run_settings.h), the service's (ServiceOptions) and the security's
// (ServerSecurity). Everything else about a setting is derived from its row:
//
//   - ServerSettings, the struct convoy_ps reads its flags into;
//   - convoy_ps's flag (CONVOY_SERVER_SETTING_FLAG, expanded there at global scope);
//   - the range checks (ServerSettingRanges);
//   - the options the server starts with (ServerOptionsFrom, ServiceOptionsFrom,
//     ServerSecurityFrom), which read the struct.
//
// The settings other binaries take too (seed, model, resume, port, ...) are written through
// common/settings/process_settings.h: one name, one type everywhere. Adding a setting is one row
// here and the code that uses it.
#ifndef CONVOY_PARAM_SERVER_SERVICE_SERVER_SETTINGS_H_
#define CONVOY_PARAM_SERVER_SERVICE_SERVER_SETTINGS_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/settings/exploration.h"
#include "common/settings/flag_ranges.h"
#include "common/settings/process_settings.h"
#include "common/settings/run_settings.h"
#include "common/wire/security.h"
#include "param_server/core/optimizer.h"
#include "param_server/core/parameter_server.h"
#include "param_server/service/service.h"

// One row per setting:
//   X(type, name, default, min, max, ends, help)
// - name: convoy_ps's flag and the member of ServerSettings.
// - default: ParameterServerOptions' where the core has the setting (ServerDefaults()).
// - min, max: the allowed range (booleans, strings and the optimizer: any); ends: which ends belong
//   to it (common/settings/flag_ranges.h). A bound may read another setting as settings.<name>.
#define CONVOY_SERVER_SETTINGS(X)                                                                  \
  CONVOY_PROCESS_SETTING(X, port, 50051, 0, 65535, kClosed,                                        \
                         "Port to listen on; 0 picks a free one (see --port_file).")               \
  CONVOY_PROCESS_SETTING(X, bind, "0.0.0.0", 0, 0, kClosed, "Address to listen on.")               \
  X(std::string, port_file, "", 0, 0, kClosed,                                                     \
    "If set, the bound port is written to this file once serving.")                                \
  CONVOY_PROCESS_SETTING(X, model, ::convoy::ps::ServerDefaults().model, 0, 0, kClosed,            \
                         "Model to serve (registry name, e.g. cookbook, nature_dueling).")         \
  X(int, num_actions, ::convoy::ps::ServerDefaults().num_actions, 1, 4096, kClosed,                \
    "Number of discrete actions of the Q-network.")                                                \
  CONVOY_PROCESS_SETTING(X, seed, ::convoy::ps::ServerDefaults().seed, 0, ::convoy::kNoUintMax,    \
                         kClosed, "Seed of the initial weights.")                                  \
  X(std::string, init_checkpoint, "", 0, 0, kClosed,                                               \
    "Take the initial weights from: a checkpoint directory (ckpt-...), a run's --checkpoint_dir "  \
    "(its newest), or a sharded run's checkpoint set (the directory holding shard-0, shard-1, "    \
    "...), assembled; each shard takes its slice, so a run can restart with another "              \
    "--num_shards. The optimizer's state and the versions start over.")                            \
  X(std::string, checkpoint_dir, "", 0, 0, kClosed,                                                \
    "Directory for checkpoints; empty disables them.")                                             \
  CONVOY_PROCESS_SETTING(                                                                          \
      X, resume, ::convoy::ps::ServerDefaults().resume, false, true, kClosed,                      \
      "Continue the run of the newest valid checkpoint in --checkpoint_dir. Without it, a "        \
      "--checkpoint_dir that holds checkpoints is refused (exit 2): they are another run's.")      \
  X(int, keep_checkpoints, ::convoy::ps::ServerDefaults().keep_checkpoints, 1, 100000, kClosed,    \
    "Newest checkpoints to keep.")                                                                 \
  X(uint64_t, checkpoint_every_updates, ::convoy::ps::ServerDefaults().checkpoint_every_updates,   \
    0, ::convoy::kNoUintMax, kClosed, "Checkpoint every N applied updates (0: off).")              \
  X(double, checkpoint_every_seconds,                                                              \
    absl::ToDoubleSeconds(::convoy::ps::ServerDefaults().checkpoint_every), 0,                     \
    ::convoy::kNoRealMax, kClosed, "Checkpoint every N seconds (0: off).")                         \
  X(::convoy::ps::Optimizer, optimizer, ::convoy::ps::ServerDefaults().optimizer.kind, 0, 0,       \
    kClosed, "adam, adamw, rmsprop, sgd, or delta (w += pushed tensor).")                          \
  X(double, beta1, ::convoy::ps::ServerDefaults().optimizer.beta1, 0, 1, kOpenMax, "Adam beta1.")  \
  X(double, beta2, ::convoy::ps::ServerDefaults().optimizer.beta2, 0, 1, kOpenMax, "Adam beta2.")  \
  X(double, eps, ::convoy::ps::ServerDefaults().optimizer.eps, 0, 1, kOpenMin,                     \
    "Optimizer epsilon (Adam, RMSprop).")                                                          \
  X(double, weight_decay, ::convoy::ps::ServerDefaults().optimizer.weight_decay, 0, 1, kClosed,    \
    "Weight decay (L2; decoupled for adamw).")                                                     \
  X(double, momentum, ::convoy::ps::ServerDefaults().optimizer.momentum, 0, 1, kOpenMax,           \
    "Momentum for sgd and rmsprop.")                                                               \
  X(double, rmsprop_alpha, ::convoy::ps::ServerDefaults().optimizer.rmsprop_alpha, 0, 1, kOpenMax, \
    "RMSprop smoothing constant.")                                                                 \
  X(double, max_grad_norm, ::convoy::ps::ServerDefaults().optimizer.max_grad_norm, 0,              \
    ::convoy::kNoRealMax, kClosed, "Clip each pushed gradient's L2 norm to this (0: off).")        \
  X(int64_t, max_staleness, ::convoy::ps::ServerDefaults().max_staleness, -1, ::convoy::kNoIntMax, \
    kClosed, "Reject pushes computed more than this many versions ago (-1: accept any).")          \
  X(bool, staleness_lr_scaling, ::convoy::ps::ServerDefaults().staleness_lr_scaling, false, true,  \
    kClosed, "Apply a push s versions old with lr / (1 + s).")                                     \
  CONVOY_PROCESS_SETTING(                                                                          \
      X, average_horizon, ::convoy::ps::ServerDefaults().average_horizon, 0, ::convoy::kNoUintMax, \
      kClosed,                                                                                     \
      "The averaged network (pull NETWORK_AVERAGE; average.pt in checkpoints): the online "        \
      "weights averaged exponentially over this many applied minibatches (0: off).")               \
  X(double, average_every_seconds,                                                                 \
    absl::ToDoubleSeconds(::convoy::ps::ServerDefaults().average_every), 0, ::convoy::kNoRealMax,  \
    kOpenMin, "Seconds between folds of the online weights into the averaged network.")            \
  X(std::string, exploration,                                                                      \
    ::convoy::ExplorationModeName(::convoy::ps::ServerDefaults().exploration.mode), 0, 0, kClosed, \
    "global: one epsilon decayed per update (the cookbook's); apex: fixed per-agent epsilons.")    \
  X(double, start_epsilon, ::convoy::ps::ServerDefaults().exploration.start_epsilon, 0, 1,         \
    kClosed, "Initial global epsilon.")                                                            \
  X(double, apex_base_epsilon, ::convoy::ps::ServerDefaults().exploration.apex_base_epsilon, 0, 1, \
    kClosed, "Ape-X: epsilon_i = base^(1 + alpha * i / (N - 1)).")                                 \
  X(double, apex_alpha, ::convoy::ps::ServerDefaults().exploration.apex_alpha, 0, 100, kClosed,    \
    "Ape-X alpha.")                                                                                \
  X(uint32_t, apex_num_agents, ::convoy::ps::ServerDefaults().exploration.apex_num_agents, 1,      \
    65536, kClosed, "Ape-X: N, the number of agents.")                                             \
  CONVOY_SERVER_SERVING_SETTINGS(X)

// The rest of the table: how the server serves (its drain, its security, its buffers, its shard).
#define CONVOY_SERVER_SERVING_SETTINGS(X)                                                        \
  X(double, shutdown_grace_seconds, 10, 0, ::convoy::kNoRealMax, kClosed,                        \
    "How long in-flight RPCs may run on after SIGTERM (0.5 s at most when the launcher that "    \
    "started this server died: common/support/child_process.h).")                                \
  CONVOY_PROCESS_SETTING(X, tls_cert, "", 0, 0, kClosed,                                         \
                         "PEM certificate chain to serve TLS with.")                             \
  CONVOY_PROCESS_SETTING(X, tls_key, "", 0, 0, kClosed, "PEM private key of --tls_cert.")        \
  X(std::string, tls_client_ca, "", 0, 0, kClosed,                                               \
    "PEM CA certificate: require clients to present a certificate it signed (mutual TLS).")      \
  CONVOY_PROCESS_SETTING(                                                                        \
      X, auth_token_file, "", 0, 0, kClosed,                                                     \
      "File holding the bearer token every call must carry (else $CONVOY_AUTH_TOKEN; neither: "  \
      "none).")                                                                                  \
  CONVOY_PROCESS_SETTING(                                                                        \
      X, insecure, false, false, true, kClosed,                                                  \
      "Serve plaintext (no --tls_cert; logs a warning). Off by default: without TLS files the "  \
      "server refuses to start unless this is given.")                                           \
  X(std::string, write_credentials, "", 0, 0, kClosed,                                           \
    "Write DIR/tls.crt, DIR/tls.key, DIR/ca.crt and DIR/auth_token for a cluster run (keeping "  \
    "any already there), then exit. Serve with --tls_cert=DIR/tls.crt --tls_key=DIR/tls.key "    \
    "--auth_token_file=DIR/auth_token; clients take --tls_ca=DIR/ca.crt "                        \
    "--tls_server_name=<--credentials_server_name> --auth_token_file=DIR/auth_token.")           \
  X(std::string, credentials_server_name, "convoy-ps", 0, 0, kClosed,                            \
    "DNS name the --write_credentials certificate is valid for (besides localhost and "          \
    "127.0.0.1).")                                                                               \
  X(int, credentials_days, 365, 1, 36500, kClosed,                                               \
    "Validity of the --write_credentials certificate, days.")                                    \
  X(bool, health_without_auth, false, false, true, kClosed,                                      \
    "Answer health checks without the bearer token.")                                            \
  X(double, stream_idle_timeout_seconds, 60, 0, ::convoy::kNoRealMax, kClosed,                   \
    "Cancel a push stream that sends no chunk for this long, so a stalled client frees its "     \
    "push buffer (0: never).")                                                                   \
  X(uint32_t, max_pushes_per_step, ::convoy::ps::ServerDefaults().max_pushes_per_step, 1, 65536, \
    kClosed,                                                                                     \
    "Pushes one optimizer step may combine: the apply worker drains up to this many queued "     \
    "pushes, decides each (exactly-once, lineage, staleness) against the version before the "    \
    "step, and steps once on the accepted ones' minibatch-weighted mean, making one version. "   \
    "1: one step per push.")                                                                     \
  X(uint32_t, push_buffers, 0, 0, 1 << 20, kClosed,                                              \
    "Model-sized buffers pushes are received into: the bound on pushes being received, "         \
    "queued or applied, and on their memory (this x parameters x 4 bytes). 0: 2 x "              \
    "--max_pushes_per_step + 4.")                                                                \
  X(uint32_t, max_waiting_pushes, 4096, 0, 1 << 24, kClosed,                                     \
    "Push streams that may wait, unread, for a buffer; the next is refused with "                \
    "RESOURCE_EXHAUSTED (SERVER_BUSY) and a retry delay, which agents honour.")                  \
  X(uint32_t, concurrent_pulls, 0, 0, 1 << 20, kClosed,                                          \
    "Pulls written at once (each of the newest version when its turn comes); the others wait, "  \
    "holding nothing, so the weights in flight are bounded. 0: as many as the default push "     \
    "buffers.")                                                                                  \
  X(uint32_t, max_waiting_pulls, 4096, 0, 1 << 24, kClosed,                                      \
    "Pulls that may wait for their turn (--concurrent_pulls); the next is refused with "         \
    "RESOURCE_EXHAUSTED and a retry delay, which agents honour.")                                \
  X(uint32_t, busy_retry_after_ms, 250, 1, 3600000, kClosed,                                     \
    "The retry delay, ms, that a refusal for a busy server asks of the agent (gRPC's retry "     \
    "pushback); agents wait it out with up to half again as jitter.")                            \
  X(uint32_t, receive_window_kib, 256, 0, 1 << 20, kClosed,                                      \
    "Each stream's HTTP/2 receive window, KiB, fixed: what a push waiting for a buffer may "     \
    "have sent ahead (the transport holds about connections x this), and one push's rate is "    \
    "at most this per round trip. 0: gRPC's adaptive window (BDP probing), which grows to "      \
    "megabytes per connection.")                                                                 \
  X(uint32_t, apply_threads, 0, 0, 4096, kClosed,                                                \
    "Threads of the optimizer step (LibTorch's intra-op pool: the combination of a step's "      \
    "pushes and the optimizer's element-wise work, split into ranges of the parameters). "       \
    "0: one per core.")                                                                          \
  X(std::string, apply_log, "", 0, 0, kClosed,                                                   \
    "Append every start, applied update (which agent's push became which version) and "          \
    "checkpoint to this file, one line each, for audits and replays; empty: none.")              \
  X(uint32_t, num_shards, 1, 1, 65536, kClosed,                                                  \
    "Serve one of this many shards of the model's parameters (contiguous ranges balanced by "    \
    "element count); agents list every shard's address in --ps, in shard order.")                \
  X(uint32_t, shard_index, 0, 0, std::max<uint32_t>(settings.num_shards, 1) - 1, kClosed,        \
    "Which shard this server is, 0-based (below --num_shards).")                                 \
  X(double, fault_lose_replies, 0, 0, 1, kClosed,                                                \
    "Fault injection, for tests: answer this fraction of the pushes applied with UNAVAILABLE "   \
    "instead of their reply, as a connection lost just after the apply looks to an agent.")

namespace convoy::ps {

// The defaults the table shows: ParameterServerOptions', written once there.
const ParameterServerOptions& ServerDefaults();

// The settings as convoy_ps's flags give them.
struct ServerSettings {
#define CONVOY_SERVER_SETTING_MEMBER(type, name, def, min, max, ends, help) type name = def;
  CONVOY_SERVER_SETTINGS(CONVOY_SERVER_SETTING_MEMBER)
#undef CONVOY_SERVER_SETTING_MEMBER
};

// Every setting's range, by its flag's name.
std::vector<FlagRange> ServerSettingRanges(const ServerSettings& settings);

// The core's options: `settings`, the run settings `run` and the parsed --exploration.
ParameterServerOptions ServerOptionsFrom(const ServerSettings& settings, const RunSettings& run,
                                         ExplorationMode exploration);

// The gRPC service's options.
ServiceOptions ServiceOptionsFrom(const ServerSettings& settings);

// The TLS files, the token (read from auth_token_file, else $CONVOY_AUTH_TOKEN) and the client CA.
// Errors: an unreadable token file; TLS files that do not make server credentials (checked now, so
// that a misconfigured server stops before it reads any checkpoint, naming the flags to give).
absl::StatusOr<ServerSecurity> ServerSecurityFrom(const ServerSettings& settings);

}  // namespace convoy::ps

// convoy_ps's flag of a setting; expand CONVOY_SERVER_SETTINGS(CONVOY_SERVER_SETTING_FLAG) at
// global scope.
#define CONVOY_SERVER_SETTING_FLAG(type, name, def, min, max, ends, help) \
  ABSL_FLAG(type, name, def, help);

// Reads a setting's flag into `settings` (CONVOY_SERVER_SETTINGS_FROM_FLAGS).
#define CONVOY_SERVER_SETTING_READ(type, name, def, min, max, ends, help) \
  settings.name = absl::GetFlag(FLAGS_##name);

// Defines, where convoy_ps expands it after the flags, `convoy::ps::ServerSettings
// ServerSettingsFromFlags()`.
#define CONVOY_SERVER_SETTINGS_FROM_FLAGS()                \
  ::convoy::ps::ServerSettings ServerSettingsFromFlags() { \
    ::convoy::ps::ServerSettings settings;                 \
    CONVOY_SERVER_SETTINGS(CONVOY_SERVER_SETTING_READ)     \
    return settings;                                       \
  }

#endif  // CONVOY_PARAM_SERVER_SERVICE_SERVER_SETTINGS_H_
