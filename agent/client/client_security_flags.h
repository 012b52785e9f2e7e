// The flags every parameter-server client binary shares (convoy_agent, convoy_synthetic_agent,
// convoy_status): TLS files, the bearer token and the explicit plaintext waiver.
#ifndef CONVOY_AGENT_CLIENT_CLIENT_SECURITY_FLAGS_H_
#define CONVOY_AGENT_CLIENT_CLIENT_SECURITY_FLAGS_H_

#include <string>

#include "absl/status/statusor.h"
#include "common/wire/security.h"

namespace convoy {

// Files to use where the flags name none: a run directory's (convoy_status RUN_DIR).
struct ClientSecurityDefaults {
  std::string tls_ca_file;      // Unless --tls_ca or --insecure is given.
  std::string auth_token_file;  // Unless --auth_token_file is given; before $CONVOY_AUTH_TOKEN.
};

// ClientSecurity from --tls_ca, --tls_cert, --tls_key, --tls_server_name, --auth_token_file (else
// `defaults`' token file, else $CONVOY_AUTH_TOKEN) and --insecure. Errors: INVALID_ARGUMENT when
// neither a CA (--tls_ca, or `defaults`') nor --insecure is given (plaintext must be asked for), or
// for an empty token file; NOT_FOUND naming an unreadable file.
absl::StatusOr<ClientSecurity> ClientSecurityFromFlags(const ClientSecurityDefaults& defaults = {});

}  // namespace convoy

#endif  // CONVOY_AGENT_CLIENT_CLIENT_SECURITY_FLAGS_H_
