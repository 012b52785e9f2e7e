#include "agent/client/client_security_settings.h"

#include <memory>
#include <string>

#include "common/support/status_macros.h"

namespace convoy::agent {

absl::StatusOr<ClientSecurity> ClientSecurityFrom(const ClientSecuritySettings& settings,
                                                  const ClientSecurityDefaults& defaults) {
  ClientSecurity security;
  security.tls_ca_file = settings.tls_ca;
  if (security.tls_ca_file.empty() && !settings.insecure) {
    security.tls_ca_file = defaults.tls_ca_file;
  }
  security.tls_cert_file = settings.tls_cert;
  security.tls_key_file = settings.tls_key;
  security.tls_server_name = settings.tls_server_name;
  security.insecure = settings.insecure;
  // The same check MakeChannelCredentials makes, here so that a misconfigured client fails at once
  // rather than on its first call.
  if (absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
          MakeChannelCredentials(security);
      !credentials.ok()) {
    return credentials.status();
  }
  std::string token_file = settings.auth_token_file;
  if (token_file.empty()) token_file = defaults.auth_token_file;
  CONVOY_ASSIGN_OR_RETURN(security.auth_token, ReadAuthToken(token_file));
  return security;
}

}  // namespace convoy::agent
