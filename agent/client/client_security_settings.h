// The security settings every parameter-server client binary shares (convoy_agent,
// convoy_synthetic_agent, convoy_status, convoy_bench_ps): TLS files, the bearer token and the
// explicit plaintext waiver. Each such binary declares them as flags by expanding
// CONVOY_SETTINGS_FLAGS(CONVOY_CLIENT_SECURITY_SETTINGS, ClientSecuritySettings, ...)
// (common/support/settings_table.h). Its rows of names a server takes too (tls_cert, tls_key,
// auth_token_file, insecure) are written through common/settings/process_settings.h.
#ifndef CONVOY_AGENT_CLIENT_CLIENT_SECURITY_SETTINGS_H_
#define CONVOY_AGENT_CLIENT_CLIENT_SECURITY_SETTINGS_H_

#include <string>

#include "absl/status/statusor.h"
#include "common/settings/process_settings.h"
#include "common/support/settings_table.h"
#include "common/wire/security.h"

#define CONVOY_CLIENT_SECURITY_SETTINGS(X)                                                  \
  X(std::string, tls_ca, "",                                                                \
    "PEM CA certificate the parameter server's certificate must chain "                     \
    "to.")                                                                                  \
  CONVOY_PROCESS_SETTING(X, tls_cert, "",                                                   \
                         "PEM client certificate, for a server requiring mutual TLS.")      \
  CONVOY_PROCESS_SETTING(X, tls_key, "", "PEM private key of --tls_cert.")                  \
  X(std::string, tls_server_name, "",                                                       \
    "Name to check in the server's certificate (default: the host of --ps; convoy-ps for "  \
    "certificates from convoy_ps --write_credentials).")                                    \
  CONVOY_PROCESS_SETTING(                                                                   \
      X, auth_token_file, "",                                                               \
      "File holding the bearer token (else $CONVOY_AUTH_TOKEN; neither: none).")            \
  CONVOY_PROCESS_SETTING(                                                                   \
      X, insecure, false,                                                                   \
      "Talk plaintext to the parameter server (no --tls_ca). Off by default: the server's " \
      "certificate is checked unless this is given.")

namespace convoy::agent {

struct ClientSecuritySettings {
  CONVOY_CLIENT_SECURITY_SETTINGS(CONVOY_SETTING_MEMBER)
};

// Files to use where the settings name none: a run directory's (convoy_status RUN_DIR).
struct ClientSecurityDefaults {
  std::string tls_ca_file;      // Unless --tls_ca or --insecure is given.
  std::string auth_token_file;  // Unless --auth_token_file is given; before $CONVOY_AUTH_TOKEN.
};

// ClientSecurity from tls_ca, tls_cert, tls_key, tls_server_name, auth_token_file (else
// `defaults`' token file, else $CONVOY_AUTH_TOKEN) and insecure. Errors: INVALID_ARGUMENT when
// neither a CA (tls_ca, or `defaults`') nor insecure is given (plaintext must be asked for), or
// for an empty token file; NOT_FOUND naming an unreadable file.
absl::StatusOr<ClientSecurity> ClientSecurityFrom(const ClientSecuritySettings& settings,
                                                  const ClientSecurityDefaults& defaults = {});

}  // namespace convoy::agent

#endif  // CONVOY_AGENT_CLIENT_CLIENT_SECURITY_SETTINGS_H_
