#include "common/wire/security.h"

#include <glog/logging.h>
#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/support/files.h"
#include "common/support/secret_file.h"
#include "common/support/status_macros.h"

namespace convoy {
namespace {

constexpr char kBearerPrefix[] = "Bearer ";

// The contents of the file a flag names; errors name the flag.
absl::StatusOr<std::string> ReadFile(const std::string& path, const char* what) {
  absl::StatusOr<std::string> contents = ReadFileToString(path);
  if (!contents.ok()) {
    return absl::Status(contents.status().code(),
                        absl::StrCat(what, ": ", contents.status().message()));
  }
  return contents;
}

}  // namespace

absl::StatusOr<std::string> ReadAuthToken(const std::string& token_file) {
  if (!token_file.empty()) {
    CONVOY_ASSIGN_OR_RETURN(std::string token, ReadFile(token_file, "--auth_token_file"));
    std::string stripped(absl::StripAsciiWhitespace(token));
    if (stripped.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--auth_token_file ", token_file, " is empty"));
    }
    return stripped;
  }
  const char* env = std::getenv(kAuthTokenEnv);
  return env == nullptr ? std::string() : std::string(absl::StripAsciiWhitespace(env));
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const ServerSecurity& security) {
  const bool tls = !security.tls_cert_file.empty() || !security.tls_key_file.empty();
  if (!tls) {
    if (!security.insecure) {
      return absl::InvalidArgumentError(
          "no TLS: give --tls_cert and --tls_key, or --insecure to serve plaintext");
    }
    LOG(WARNING)
        << "serving PLAINTEXT (--insecure): anyone who can reach this port can push weights"
        << (security.auth_token.empty() ? " and there is no auth token" : "");
    return grpc::InsecureServerCredentials();
  }
  if (security.tls_cert_file.empty() || security.tls_key_file.empty()) {
    return absl::InvalidArgumentError("TLS needs both --tls_cert and --tls_key");
  }
  CONVOY_ASSIGN_OR_RETURN(std::string cert, ReadFile(security.tls_cert_file, "--tls_cert"));
  CONVOY_ASSIGN_OR_RETURN(std::string key, ReadFile(security.tls_key_file, "--tls_key"));
  grpc::SslServerCredentialsOptions options(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  options.pem_key_cert_pairs.push_back({key, cert});
  if (!security.tls_client_ca_file.empty()) {
    CONVOY_ASSIGN_OR_RETURN(std::string ca,
                            ReadFile(security.tls_client_ca_file, "--tls_client_ca"));
    options.pem_root_certs = ca;
    options.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(options);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const ClientSecurity& security) {
  if (security.tls_ca_file.empty()) {
    if (!security.insecure) {
      return absl::InvalidArgumentError(
          "no TLS: give --tls_ca (the server's CA certificate), or --insecure for plaintext");
    }
    return grpc::InsecureChannelCredentials();
  }
  grpc::SslCredentialsOptions options;
  CONVOY_ASSIGN_OR_RETURN(std::string ca, ReadFile(security.tls_ca_file, "--tls_ca"));
  options.pem_root_certs = ca;
  if (!security.tls_cert_file.empty() || !security.tls_key_file.empty()) {
    CONVOY_ASSIGN_OR_RETURN(std::string cert, ReadFile(security.tls_cert_file, "--tls_cert"));
    CONVOY_ASSIGN_OR_RETURN(std::string key, ReadFile(security.tls_key_file, "--tls_key"));
    options.pem_cert_chain = cert;
    options.pem_private_key = key;
  }
  return grpc::SslCredentials(options);
}

bool CallAuthorized(const grpc::ServerContextBase& context, const std::string& token) {
  if (token.empty()) return true;
  const std::multimap<grpc::string_ref, grpc::string_ref>& metadata = context.client_metadata();
  auto it = metadata.find(kAuthorizationHeader);
  if (it == metadata.end()) return false;
  const std::string expected = absl::StrCat(kBearerPrefix, token);
  const grpc::string_ref& got = it->second;
  return got.size() == expected.size() &&
         CRYPTO_memcmp(got.data(), expected.data(), expected.size()) == 0;
}

void AddAuthToken(grpc::ClientContext* context, const std::string& token) {
  if (!token.empty())
    context->AddMetadata(kAuthorizationHeader, absl::StrCat(kBearerPrefix, token));
}

std::string GenerateAuthToken() {
  unsigned char bytes[32];
  RAND_bytes(bytes, sizeof(bytes));
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<char*>(bytes), sizeof(bytes)));
}

absl::Status WriteSelfSignedCertificate(const std::string& cert_path, const std::string& key_path,
                                        int days, const std::vector<std::string>& dns_names) {
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(EVP_EC_gen("prime256v1"), &EVP_PKEY_free);
  if (key == nullptr) return absl::InternalError("cannot generate an EC key");
  std::unique_ptr<X509, decltype(&X509_free)> cert(X509_new(), &X509_free);
  X509_set_version(cert.get(), 2);
  unsigned char serial[16];
  RAND_bytes(serial, sizeof(serial));
  serial[0] &= 0x7f;
  std::unique_ptr<BIGNUM, decltype(&BN_free)> bn(BN_bin2bn(serial, sizeof(serial), nullptr),
                                                 &BN_free);
  BN_to_ASN1_INTEGER(bn.get(), X509_get_serialNumber(cert.get()));
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -60);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 60L * 60 * 24 * days);
  X509_set_pubkey(cert.get(), key.get());
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("localhost"), -1, -1, 0);
  X509_set_issuer_name(cert.get(), name);
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, cert.get(), cert.get(), nullptr, nullptr, 0);
  std::string alt_names = "DNS:localhost,IP:127.0.0.1";
  for (const std::string& dns : dns_names) absl::StrAppend(&alt_names, ",DNS:", dns);
  for (auto [nid, value] : {std::pair{NID_subject_alt_name, alt_names.c_str()},
                            std::pair{NID_basic_constraints, "critical,CA:TRUE"}}) {
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
    if (ext == nullptr) return absl::InternalError("cannot build a certificate extension");
    X509_add_ext(cert.get(), ext, -1);
    X509_EXTENSION_free(ext);
  }
  if (X509_sign(cert.get(), key.get(), EVP_sha256()) == 0) {
    return absl::InternalError("cannot sign the certificate");
  }
  // PEM in memory first, so that each file is created whole with its mode (the key never wider
  // than 0600).
  auto pem = [](auto&& writer) -> std::optional<std::string> {
    std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), &BIO_free);
    if (bio == nullptr || !writer(bio.get())) return std::nullopt;
    char* data = nullptr;
    const long size = BIO_get_mem_data(bio.get(), &data);
    return std::string(data, static_cast<size_t>(size));
  };
  const std::optional<std::string> key_pem = pem([&](BIO* bio) {
    return PEM_write_bio_PrivateKey(bio, key.get(), nullptr, nullptr, 0, nullptr, nullptr) == 1;
  });
  const std::optional<std::string> cert_pem =
      pem([&](BIO* bio) { return PEM_write_bio_X509(bio, cert.get()) == 1; });
  if (!key_pem || !cert_pem) return absl::InternalError("cannot encode the key and certificate");
  CONVOY_RETURN_IF_ERROR(WriteSecretFile(key_path, *key_pem));
  return WriteFileAtomically(cert_path, *cert_pem, 0644);
}

absl::Status WriteClusterCredentials(const std::string& dir, const std::string& server_name,
                                     int days) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error)
    return absl::PermissionDeniedError(absl::StrCat("cannot create ", dir, ": ", error.message()));
  const std::string cert = dir + "/tls.crt";
  const std::string key = dir + "/tls.key";
  const std::string token = dir + "/auth_token";
  const bool have_cert = std::filesystem::exists(cert);
  if (have_cert != std::filesystem::exists(key)) {
    return absl::FailedPreconditionError(absl::StrCat(
        dir, " holds only one of tls.crt and tls.key: remove it, or add the other, and retry"));
  }
  if (!have_cert) {
    // Written under temporary names and renamed, so that a reader never sees a half-written pair.
    const std::string temp_cert = cert + ".tmp";
    const std::string temp_key = key + ".tmp";
    if (absl::Status s = WriteSelfSignedCertificate(temp_cert, temp_key, days, {server_name});
        !s.ok()) {
      return s;
    }
    // The self-signed certificate is its own CA: ca.crt is a copy of it, replacing any older ca.crt
    // (which trusted a pair that is gone). tls.crt comes last, so a tls.crt means the set is
    // complete.
    const std::string ca = dir + "/ca.crt";
    std::filesystem::rename(temp_key, key, error);
    if (!error) {
      std::filesystem::copy_file(temp_cert, ca + ".tmp",
                                 std::filesystem::copy_options::overwrite_existing, error);
    }
    if (!error) std::filesystem::rename(ca + ".tmp", ca, error);
    if (!error) std::filesystem::rename(temp_cert, cert, error);
    if (error) {
      return absl::PermissionDeniedError(
          absl::StrCat("cannot write the certificate in ", dir, ": ", error.message()));
    }
  }
  if (!std::filesystem::exists(token)) {
    CONVOY_RETURN_IF_ERROR(WriteSecretFile(token, GenerateAuthToken() + "\n"));
  }
  return absl::OkStatus();
}

}  // namespace convoy
