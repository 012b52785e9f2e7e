// The convoy_sim binary itself: flags, the printed port, serving, and a clean exit on SIGTERM.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <string>

#include "simulator_bridge/airsim_client.h"
#include "simulator_bridge/socket.h"

namespace convoy {
namespace {

// Starts convoy_sim with `args`, returns its pid and the port it printed (0 when it printed none
// within the deadline).
pid_t StartConvoySim(const std::vector<std::string>& args, int* port, std::string* output) {
  int out[2];
  REQUIRE(pipe(out) == 0);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    dup2(out[1], STDOUT_FILENO);
    close(out[0]);
    close(out[1]);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(CONVOY_SIM_BINARY));
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(CONVOY_SIM_BINARY, argv.data());
    _exit(127);
  }
  close(out[1]);
  *port = 0;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  char buffer[512];
  while (output->find('\n') == std::string::npos && WaitReadable(out[0], deadline).ok()) {
    const ssize_t n = read(out[0], buffer, sizeof(buffer));
    if (n <= 0) break;
    output->append(buffer, static_cast<size_t>(n));
  }
  close(out[0]);
  const size_t colon = output->rfind(':');
  if (output->rfind("convoy_sim listening on ", 0) == 0 && colon != std::string::npos) {
    *port = std::atoi(output->c_str() + colon + 1);
  }
  return pid;
}

// Waits (bounded) for the child to exit; returns its exit status, or -1 if it had to be killed.
int WaitExit(pid_t pid) {
  for (int i = 0; i < 200; ++i) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    absl::SleepFor(absl::Milliseconds(50));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return -1;
}

TEST_CASE("convoy_sim prints its ephemeral port, serves, and exits cleanly on SIGTERM",
          "[convoy_sim]") {
  int port = 0;
  std::string output;
  const pid_t pid = StartConvoySim({"--port=0", "--clock=lockstep", "--parked_cars=5", "--seed=3"},
                                   &port, &output);
  INFO(output);
  REQUIRE(port > 0);
  {
    AirSimClientOptions options;
    options.port = port;
    absl::StatusOr<std::unique_ptr<AirSimClient>> client = AirSimClient::Connect(options);
    REQUIRE(client.ok());
    CHECK(*(*client)->IsPaused());
    REQUIRE((*client)->ContinueForTime(absl::Seconds(1)).ok());
    CHECK((*client)->GetState()->timestamp == 1000000000u);
  }
  kill(pid, SIGTERM);
  CHECK(WaitExit(pid) == 0);
}

TEST_CASE("convoy_sim rejects a bad clock mode", "[convoy_sim]") {
  int port = 0;
  std::string output;
  const pid_t pid = StartConvoySim({"--port=0", "--clock=sometimes"}, &port, &output);
  CHECK(port == 0);
  CHECK(WaitExit(pid) == 1);
}

}  // namespace
}  // namespace convoy
