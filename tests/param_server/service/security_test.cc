// TLS, mutual TLS and bearer tokens on a real parameter server over loopback.
#include "common/wire/security.h"

#include <signal.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "grpc/health/v1/health.grpc.pb.h"
#include "tests/catch.h"
#include "tests/param_server/service/loopback_server.h"
#include "tests/support/subprocess.h"

namespace convoy::ps {
namespace {

using testing::LoopbackServer;
using testing::MakeTempDir;

struct Certificates {
  std::string dir, cert, key;
  Certificates() : dir(MakeTempDir("tls")), cert(dir + "/cert.pem"), key(dir + "/key.pem") {
    REQUIRE(WriteSelfSignedCertificate(cert, key).ok());
  }
};

ParameterServerOptions Tiny() {
  ParameterServerOptions o;
  o.model = "tiny";
  return o;
}

absl::StatusCode JoinWith(const LoopbackServer& ps, const ClientSecurity& security) {
  agent::PsClientOptions o = ps.ClientOptions("a");
  o.security = security;
  o.retry_for = absl::ZeroDuration();
  o.call_timeout = absl::Seconds(5);
  absl::StatusOr<std::unique_ptr<agent::PsClient>> client = agent::PsClient::Create(o);
  if (!client.ok()) return client.status().code();
  return (*client)->Join().status().code();
}

ClientSecurity TlsClient(const Certificates& certs) {
  ClientSecurity s;
  s.tls_ca_file = certs.cert;
  return s;
}

TEST_CASE("A TLS server talks to TLS clients that trust its certificate only", "[security]") {
  Certificates certs;
  ServerSecurity server;
  server.tls_cert_file = certs.cert;
  server.tls_key_file = certs.key;
  LoopbackServer ps(Tiny(), server);
  CHECK(JoinWith(ps, TlsClient(certs)) == absl::StatusCode::kOk);
  ClientSecurity plaintext;
  plaintext.insecure = true;
  CHECK(JoinWith(ps, plaintext) == absl::StatusCode::kUnavailable);
  Certificates other;  // A certificate the client does not trust.
  CHECK(JoinWith(ps, TlsClient(other)) == absl::StatusCode::kUnavailable);
}

TEST_CASE("Mutual TLS refuses clients without a certificate the server trusts", "[security]") {
  Certificates certs;
  ServerSecurity server;
  server.tls_cert_file = certs.cert;
  server.tls_key_file = certs.key;
  server.tls_client_ca_file = certs.cert;
  LoopbackServer ps(Tiny(), server);
  CHECK(JoinWith(ps, TlsClient(certs)) == absl::StatusCode::kUnavailable);
  ClientSecurity with_cert = TlsClient(certs);
  with_cert.tls_cert_file = certs.cert;
  with_cert.tls_key_file = certs.key;
  CHECK(JoinWith(ps, with_cert) == absl::StatusCode::kOk);
}

TEST_CASE("Every call without the right bearer token is refused and counted", "[security]") {
  Certificates certs;
  ServerSecurity server;
  server.tls_cert_file = certs.cert;
  server.tls_key_file = certs.key;
  server.auth_token = "s3cret-token";
  LoopbackServer ps(Tiny(), server);
  ClientSecurity client = TlsClient(certs);
  CHECK(JoinWith(ps, client) == absl::StatusCode::kUnauthenticated);
  client.auth_token = "wrong-token!";
  CHECK(JoinWith(ps, client) == absl::StatusCode::kUnauthenticated);

  agent::PsClientOptions o = ps.ClientOptions("a");
  o.security = client;
  o.retry_for = absl::ZeroDuration();
  auto wrong = *agent::PsClient::Create(o);
  std::vector<float> w(ps.server->core().model().parameter_count, 0.1f);
  CHECK(wrong->Pull(0, 0, v1::NETWORK_ONLINE, &w).status().code() ==
        absl::StatusCode::kUnauthenticated);
  CHECK(wrong->Push(w.data(), w.size(), 0, 1).status().code() ==
        absl::StatusCode::kUnauthenticated);
  CHECK(wrong->Status().status().code() == absl::StatusCode::kUnauthenticated);
  // Health checks need the token too.
  auto channel = grpc::CreateChannel(ps.address, *MakeChannelCredentials(client));
  auto health = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext context;
  AddAuthToken(&context, client.auth_token);
  grpc::health::v1::HealthCheckResponse response;
  CHECK(health->Check(&context, {}, &response).error_code() == grpc::StatusCode::UNAUTHENTICATED);

  o.security.auth_token = "s3cret-token";
  auto right = *agent::PsClient::Create(o);
  REQUIRE(right->Join().ok());
  CHECK(right->Push(w.data(), w.size(), 0, 1)->accepted);
  const v1::StatusResponse status = ps.Status();
  CHECK(status.unauthenticated_calls() == 6);  // Two joins, pull, push, status, health.
  CHECK(status.version() == 1);
}

TEST_CASE("Health checks may be allowed without the token", "[security]") {
  ServerSecurity server = LoopbackServer::PlaintextSecurity();
  server.auth_token = "t";
  server.health_without_auth = true;
  LoopbackServer ps(Tiny(), server);
  auto health = grpc::health::v1::Health::NewStub(ps.channel);
  grpc::ClientContext context;
  grpc::health::v1::HealthCheckResponse response;
  REQUIRE(health->Check(&context, {}, &response).ok());
  CHECK(response.status() == grpc::health::v1::HealthCheckResponse::SERVING);
  grpc::ClientContext join;
  v1::JoinResponse joined;
  CHECK(ps.stub->Join(&join, {}, &joined).error_code() == grpc::StatusCode::UNAUTHENTICATED);
}

TEST_CASE("Plaintext needs an explicit insecure and TLS needs both files", "[security]") {
  ServerSecurity none;
  CHECK(MakeServerCredentials(none).status().code() == absl::StatusCode::kInvalidArgument);
  ServerSecurity half;
  half.tls_cert_file = "/nonexistent/cert.pem";
  CHECK(MakeServerCredentials(half).status().code() == absl::StatusCode::kInvalidArgument);
  half.tls_key_file = "/nonexistent/key.pem";
  CHECK_THAT(std::string(MakeServerCredentials(half).status().message()),
             Catch::Matchers::ContainsSubstring("/nonexistent/cert.pem"));
  ClientSecurity client;
  CHECK(MakeChannelCredentials(client).status().code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("The bearer token comes from a file or the environment", "[security]") {
  const std::string dir = MakeTempDir("token");
  std::ofstream(dir + "/token") << "  abc123\n";
  CHECK(*ReadAuthToken(dir + "/token") == "abc123");
  std::ofstream(dir + "/empty") << "\n";
  CHECK(ReadAuthToken(dir + "/empty").status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(ReadAuthToken(dir + "/missing").status().code() == absl::StatusCode::kNotFound);
  ::setenv(kAuthTokenEnv, "from-env", 1);
  CHECK(*ReadAuthToken("") == "from-env");
  ::unsetenv(kAuthTokenEnv);
  CHECK(ReadAuthToken("")->empty());
  CHECK(GenerateAuthToken().size() == 64);
  CHECK(GenerateAuthToken() != GenerateAuthToken());
}

TEST_CASE("convoy_ps never logs its token", "[security][process]") {
  const std::string dir = MakeTempDir("token_log");
  const std::string token = GenerateAuthToken();
  std::ofstream(dir + "/token") << token;
  absl::StatusOr<testing::Subprocess> ps = testing::Subprocess::Start(
      {CONVOY_PS_BINARY, "--model=tiny", "--port=0", "--bind=127.0.0.1",
       "--port_file=" + dir + "/port", "--auth_token_file=" + dir + "/token", "--insecure"},
      dir + "/log");
  REQUIRE(ps.ok());
  REQUIRE(testing::WaitForFileLine(dir + "/port", absl::Seconds(60)).ok());
  ps->Signal(SIGTERM);
  REQUIRE(ps->Wait(absl::Seconds(30)) == 0);
  const std::string log = testing::ReadWholeFile(dir + "/log");
  CHECK_THAT(log, Catch::Matchers::ContainsSubstring("bearer token"));
  CHECK(log.find(token) == std::string::npos);
}

TEST_CASE("convoy_ps and convoy_agent refuse plaintext unless --insecure is given",
          "[security][process]") {
  const std::string dir = MakeTempDir("plaintext_refused");
  absl::StatusOr<testing::Subprocess> ps = testing::Subprocess::Start(
      {CONVOY_PS_BINARY, "--model=tiny", "--port=0", "--bind=127.0.0.1",
       "--port_file=" + dir + "/port", "--checkpoint_dir=" + dir + "/ckpt"},
      dir + "/ps.log");
  REQUIRE(ps.ok());
  CHECK(ps->Wait(absl::Seconds(30)) == 2);
  const std::string ps_log = testing::ReadWholeFile(dir + "/ps.log");
  CHECK_THAT(ps_log, Catch::Matchers::ContainsSubstring("--tls_cert") &&
                         Catch::Matchers::ContainsSubstring("--insecure"));
  // Nothing was started or written.
  CHECK_FALSE(std::filesystem::exists(dir + "/port"));
  CHECK_FALSE(std::filesystem::exists(dir + "/ckpt"));

  absl::StatusOr<testing::Subprocess> agent = testing::Subprocess::Start(
      {CONVOY_AGENT_BINARY, "--ps=127.0.0.1:1", "--max_steps=10", "--log_dir=" + dir + "/agent"},
      dir + "/agent.log");
  REQUIRE(agent.ok());
  CHECK(agent->Wait(absl::Seconds(60)) == 2);
  CHECK_THAT(testing::ReadWholeFile(dir + "/agent.log"),
             Catch::Matchers::ContainsSubstring("--tls_ca") &&
                 Catch::Matchers::ContainsSubstring("--insecure"));
  CHECK_FALSE(std::filesystem::exists(dir + "/agent"));
}

TEST_CASE("convoy_ps --write_credentials makes a working TLS pair and token and keeps them",
          "[security][process]") {
  const std::string dir = MakeTempDir("credentials");
  const std::string auth = dir + "/auth";
  auto write = [&] {
    absl::StatusOr<testing::Subprocess> writer = testing::Subprocess::Start(
        {CONVOY_PS_BINARY, "--write_credentials=" + auth}, dir + "/write.log");
    REQUIRE(writer.ok());
    INFO(testing::ReadWholeFile(dir + "/write.log"));
    REQUIRE(writer->Wait(absl::Seconds(30)) == 0);
  };
  write();
  namespace fs = std::filesystem;
  const std::string cert = testing::ReadWholeFile(auth + "/tls.crt");
  const std::string token = *ReadAuthToken(auth + "/auth_token");
  CHECK(token.size() == 64);
  CHECK(testing::ReadWholeFile(auth + "/ca.crt") == cert);  // Self-signed: its own CA.
  for (const char* secret : {"/tls.key", "/auth_token"}) {
    INFO(secret);
    CHECK((fs::status(auth + secret).permissions() &
           (fs::perms::group_all | fs::perms::others_all)) == fs::perms::none);
  }
  write();  // A second call (a requeued job) keeps what is there.
  CHECK(testing::ReadWholeFile(auth + "/tls.crt") == cert);
  CHECK(*ReadAuthToken(auth + "/auth_token") == token);

  // Only half a pair is an error that names the directory, and changes nothing.
  fs::remove(auth + "/tls.key");
  absl::StatusOr<testing::Subprocess> half = testing::Subprocess::Start(
      {CONVOY_PS_BINARY, "--write_credentials=" + auth}, dir + "/half.log");
  REQUIRE(half.ok());
  CHECK(half->Wait(absl::Seconds(30)) == 1);
  CHECK_THAT(testing::ReadWholeFile(dir + "/half.log"),
             Catch::Matchers::ContainsSubstring("only one of tls.crt and tls.key"));
  CHECK(testing::ReadWholeFile(auth + "/tls.crt") == cert);
  CHECK_FALSE(fs::exists(auth + "/tls.key"));
  fs::remove(auth + "/tls.crt");
  write();  // A new pair, and ca.crt with it.
  CHECK(testing::ReadWholeFile(auth + "/tls.crt") != cert);
  CHECK(testing::ReadWholeFile(auth + "/ca.crt") == testing::ReadWholeFile(auth + "/tls.crt"));

  // A server with them takes clients that trust the certificate under the name convoy-ps and bring
  // the token.
  ServerSecurity server;
  server.tls_cert_file = auth + "/tls.crt";
  server.tls_key_file = auth + "/tls.key";
  server.auth_token = *ReadAuthToken(auth + "/auth_token");
  LoopbackServer ps(Tiny(), server);
  ClientSecurity client;
  client.tls_ca_file = auth + "/ca.crt";
  client.tls_server_name = "convoy-ps";
  client.auth_token = server.auth_token;
  CHECK(JoinWith(ps, client) == absl::StatusCode::kOk);
  client.tls_server_name = "someone-else";
  CHECK(JoinWith(ps, client) == absl::StatusCode::kUnavailable);
  CHECK(server.auth_token == token);  // The token outlived the certificate's rewrite.
  client.tls_server_name = "convoy-ps";
  client.auth_token.clear();
  CHECK(JoinWith(ps, client) == absl::StatusCode::kUnauthenticated);
}

}  // namespace
}  // namespace convoy::ps
