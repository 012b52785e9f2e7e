#include "agent/client/client_security_flags.h"

#include <string>

#include "absl/flags/flag.h"
#include "common/support/status_macros.h"

ABSL_FLAG(std::string, tls_ca, "",
          "PEM CA certificate the parameter server's certificate must chain to.");
ABSL_FLAG(std::string, tls_cert, "", "PEM client certificate, for a server requiring mutual TLS.");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert.");
ABSL_FLAG(std::string, tls_server_name, "",
          "Name to check in the server's certificate (default: the host of --ps; convoy-ps for "
          "certificates from convoy_ps --write_credentials).");
ABSL_FLAG(std::string, auth_token_file, "",
          "File holding the bearer token (else $CONVOY_AUTH_TOKEN; neither: none).");
ABSL_FLAG(bool, insecure, false,
          "Talk plaintext to the parameter server (no --tls_ca). Off by default: the server's "
          "certificate "
          "is checked unless this is given.");

namespace convoy {

absl::StatusOr<ClientSecurity> ClientSecurityFromFlags(const ClientSecurityDefaults& defaults) {
  ClientSecurity security;
  security.tls_ca_file = absl::GetFlag(FLAGS_tls_ca);
  if (security.tls_ca_file.empty() && !absl::GetFlag(FLAGS_insecure)) {
    security.tls_ca_file = defaults.tls_ca_file;
  }
  security.tls_cert_file = absl::GetFlag(FLAGS_tls_cert);
  security.tls_key_file = absl::GetFlag(FLAGS_tls_key);
  security.tls_server_name = absl::GetFlag(FLAGS_tls_server_name);
  security.insecure = absl::GetFlag(FLAGS_insecure);
  // The same check MakeChannelCredentials makes, here so that a misconfigured client fails at once
  // rather than on its first call.
  if (absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
          MakeChannelCredentials(security);
      !credentials.ok()) {
    return credentials.status();
  }
  std::string token_file = absl::GetFlag(FLAGS_auth_token_file);
  if (token_file.empty()) token_file = defaults.auth_token_file;
  CONVOY_ASSIGN_OR_RETURN(security.auth_token, ReadAuthToken(token_file));
  return security;
}

}  // namespace convoy
