// The flags every parameter-server client binary shares (convoy_agent, convoy_synthetic_agent): TLS
// files, the bearer token and the explicit plaintext waiver.
#ifndef CONVOY_AGENT_CLIENT_SECURITY_FLAGS_H_
#define CONVOY_AGENT_CLIENT_SECURITY_FLAGS_H_

#include "absl/status/statusor.h"
#include "common/security.h"

namespace convoy {

// ClientSecurity from --tls_ca, --tls_cert, --tls_key, --tls_server_name, --auth_token_file (else
// $CONVOY_AUTH_TOKEN) and --insecure. Errors: INVALID_ARGUMENT when neither --tls_ca nor --insecure
// is given (plaintext must be asked for), or for an empty token file; NOT_FOUND naming an
// unreadable file.
absl::StatusOr<ClientSecurity> ClientSecurityFromFlags();

}  // namespace convoy

#endif  // CONVOY_AGENT_CLIENT_SECURITY_FLAGS_H_
