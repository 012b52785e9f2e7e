// The settings several processes take: one name, one type and one meaning in every binary that
// takes one, declared once below. What differs from binary to binary is the default and the help
// (what convoy_ps seeds with --seed is not what convoy_sim seeds), so a binary's table writes its
// own row of such a setting through this file, naming the setting, its default and its help,
//
//   CONVOY_PROCESS_SETTING(X, seed, 1, "Seed of the initial weights.")
//
// where another row reads X(uint64_t, seed, 1, "..."): the row's type is the one below. A row of
// one of these names written with a type of its own is refused by tests/flags_check.py, as is a
// flag declared outside a settings table.
//
// A binary whose flag is unset unless given (convoy_agent's --model pins the server's;
// convoy_train's --average_horizon follows --minutes) writes CONVOY_PROCESS_SETTING_UNLESS_GIVEN:
// the same name, std::optional of the same type.
//
// The tables of settings that several binaries share whole, rows and help alike, are their own:
// the metrics endpoint (common/metrics/prometheus_endpoint.h), a client's TLS
// (agent/client/client_security_settings.h), the driving task
// (agent/environment/scenario_settings.h), the run settings and an agent's own (run_settings.h,
// agent_settings.h).
#ifndef CONVOY_COMMON_SETTINGS_PROCESS_SETTINGS_H_
#define CONVOY_COMMON_SETTINGS_PROCESS_SETTINGS_H_

#include <cstdint>
#include <optional>
#include <string>

// One line per setting: CONVOY_PROCESS_SETTING_TYPE_<name> <type>, and its one meaning.
//
// The seed of the process's randomness: what it draws from it is the binary's (convoy_ps,
// convoy_agent, convoy_train, convoy_sim, convoy_chaos_replay).
#define CONVOY_PROCESS_SETTING_TYPE_seed uint64_t
// The Q-network, by its registry name (common/model/model_registry.h): the one served, trained,
// evaluated or pushed to.
#define CONVOY_PROCESS_SETTING_TYPE_model std::string
// Continue from the state this process (or, for a launcher, its processes) saved before, where its
// own checkpoint flag points; without it, saved state there is not taken as this run's.
#define CONVOY_PROCESS_SETTING_TYPE_resume bool
// The port and the address a server listens on (convoy_ps: gRPC; convoy_sim: AirSim's protocol).
#define CONVOY_PROCESS_SETTING_TYPE_port int
#define CONVOY_PROCESS_SETTING_TYPE_bind std::string
// The parameter server a client talks to: host:port, every shard's, or @FILE.
#define CONVOY_PROCESS_SETTING_TYPE_ps std::string
// An agent's name and its 0-based index (the Ape-X epsilon's).
#define CONVOY_PROCESS_SETTING_TYPE_agent_id std::string
#define CONVOY_PROCESS_SETTING_TYPE_agent_index uint32_t
// Seconds between progress lines.
#define CONVOY_PROCESS_SETTING_TYPE_report_seconds double
// The map directory (road_lines.txt, reward_points.txt); empty: the bundled one.
#define CONVOY_PROCESS_SETTING_TYPE_map_dir std::string
// The averaged network's horizon, in applied minibatches (0: off).
#define CONVOY_PROCESS_SETTING_TYPE_average_horizon uint64_t
// A file a line per push is appended to (agent/client/push_log.h).
#define CONVOY_PROCESS_SETTING_TYPE_push_log std::string
// A scenario's name (simulator_bridge/task/scenario.h).
#define CONVOY_PROCESS_SETTING_TYPE_scenario std::string
// The process's own certificate, its key, its bearer token's file, and the plaintext waiver
// (a server's: to serve; a client's: to talk).
#define CONVOY_PROCESS_SETTING_TYPE_tls_cert std::string
#define CONVOY_PROCESS_SETTING_TYPE_tls_key std::string
#define CONVOY_PROCESS_SETTING_TYPE_auth_token_file std::string
#define CONVOY_PROCESS_SETTING_TYPE_insecure bool

// A binary's row of setting `name`: X(type, name, <the rest of the binary's table's columns>), the
// type the one above.
#define CONVOY_PROCESS_SETTING(X, name, ...) \
  X(CONVOY_PROCESS_SETTING_TYPE_##name, name, __VA_ARGS__)

// A binary's row of setting `name` that is unset unless given: std::optional of its type.
#define CONVOY_PROCESS_SETTING_UNLESS_GIVEN(X, name, ...) \
  X(std::optional<CONVOY_PROCESS_SETTING_TYPE_##name>, name, std::nullopt, __VA_ARGS__)

#endif  // CONVOY_COMMON_SETTINGS_PROCESS_SETTINGS_H_
