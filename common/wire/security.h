// Transport security for convoy's gRPC channels: TLS (optionally mutual) and a bearer token checked
// on every call. The token is read from a file or the CONVOY_AUTH_TOKEN environment variable and is
// never logged.
#ifndef CONVOY_COMMON_WIRE_SECURITY_H_
#define CONVOY_COMMON_WIRE_SECURITY_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace convoy {

inline constexpr char kAuthTokenEnv[] = "CONVOY_AUTH_TOKEN";
inline constexpr char kAuthorizationHeader[] = "authorization";

struct ServerSecurity {
  std::string tls_cert_file;  // PEM certificate chain.
  std::string tls_key_file;   // PEM private key.
  std::string
      tls_client_ca_file;  // Set: mutual TLS, clients must present a certificate signed by it.
  std::string auth_token;  // Empty: no token check.
  bool insecure = false;   // Plaintext, only when asked for.
  bool health_without_auth = false;
};

struct ClientSecurity {
  std::string tls_ca_file;    // Root certificate(s) the server's certificate must chain to.
  std::string tls_cert_file;  // Client certificate and key, for mutual TLS.
  std::string tls_key_file;
  std::string tls_server_name;  // Overrides the name checked in the server's certificate.
  std::string auth_token;
  bool insecure = false;
};

// The token from `token_file` when given, else from $CONVOY_AUTH_TOKEN, else "" (no token).
// Surrounding whitespace is dropped. Errors: NOT_FOUND naming the unreadable file; INVALID_ARGUMENT
// for an empty file.
absl::StatusOr<std::string> ReadAuthToken(const std::string& token_file);

// Errors: INVALID_ARGUMENT when neither TLS files nor `insecure` are given, or only one of cert and
// key; NOT_FOUND naming an unreadable file. Logs a warning for plaintext.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const ServerSecurity& security);
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const ClientSecurity& security);

// Whether the call carries "authorization: Bearer <token>" (constant-time comparison). An empty
// token accepts every call.
bool CallAuthorized(const grpc::ServerContextBase& context, const std::string& token);

// Adds the bearer token (if any) to an outgoing call.
void AddAuthToken(grpc::ClientContext* context, const std::string& token);

// A random token of 32 bytes, hex-encoded, for throwaway local runs.
std::string GenerateAuthToken();

// Writes a self-signed certificate and its private key (PEM, key mode 0600) valid for `days`, with
// subject alternative names localhost, 127.0.0.1 and `dns_names`. It is its own CA: clients pass
// the certificate as --tls_ca (and one of `dns_names` as --tls_server_name when they dial another
// name).
absl::Status WriteSelfSignedCertificate(const std::string& cert_path, const std::string& key_path,
                                        int days = 7,
                                        const std::vector<std::string>& dns_names = {});

// The credentials of a cluster run, written by `convoy_ps --write_credentials=DIR`: DIR/tls.crt,
// DIR/tls.key (0600), DIR/ca.crt (what clients trust: a copy of the self-signed tls.crt) and
// DIR/auth_token (0600), the certificate valid for `days` and for `server_name`. Files already
// there are kept, so a requeued job or a second call changes nothing, and a site's own tls.crt,
// tls.key, ca.crt and token put there are used as they are; ca.crt is written only with a generated
// pair. Errors: PERMISSION_DENIED naming what could not be written; FAILED_PRECONDITION when only
// one of tls.crt and tls.key exists.
absl::Status WriteClusterCredentials(const std::string& dir, const std::string& server_name,
                                     int days);

}  // namespace convoy

#endif  // CONVOY_COMMON_WIRE_SECURITY_H_
