// ServerPresence: whether a parameter server that does not answer is gone, or only out of reach.
//
// The last sync of an agent's run tries to reach its server for up to final_sync_for, because a
// server behind a partition (a silent link, a link that is down, a stopped process) may answer
// again. A server that is gone never will: when it was killed or shut down, or its launcher was
// killed, the agent should not wait out final_sync_for for it. FinalSync asks a ServerPresence at
// its start and after each attempt that did not reach the server. Only evidence of absence counts:
// a timeout, an unreachable network or a name that does not resolve says nothing, as a partition
// looks like that too.
#ifndef CONVOY_AGENT_CLIENT_SERVER_PRESENCE_H_
#define CONVOY_AGENT_CLIENT_SERVER_PRESENCE_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace convoy::agent {

// What says that the server is gone.
enum class ServerAbsence {
  kNoEvidence,      // Nothing: it may be partitioned, busy or restarting.
  kNothingListens,  // Every address of the server refused a TCP connection (or shard, sharded).
  kLauncherDied,    // The launcher that started this process with a parent-death signal (its
                    // children do not outlive it: common/support/child_process.h) died, and with it the run
                    // it started, the server too (deploy/local's LocalCluster).
};

// "nothing listens at the server's address" and so on, for the log.
const char* ServerAbsenceName(ServerAbsence absence);

class ServerPresence {
 public:
  virtual ~ServerPresence() = default;
  // The evidence now. May block for up to the probe's timeout.
  virtual ServerAbsence Check() = 0;
};

// What a TCP connection attempt met.
enum class ConnectOutcome {
  kConnected,  // Something listens (it may be a stopped process: the kernel accepts for it).
  kRefused,    // Nothing listens: every address the name resolves to refused.
  kNoAnswer,   // No answer within the timeout, an unreachable network, or an unresolved name.
};

// Tries a TCP connection to `address` ("host:port" or "[v6]:port"; a "dns:///" prefix is allowed),
// resolving the name and connecting within `timeout` in all, and closes it at once. kRefused only
// when every address the name resolves to refused; an address of another form is kNoAnswer.
ConnectOutcome ProbeTcpConnect(const std::string& address, absl::Duration timeout);

// The real evidence: the launcher died (this process has a parent-death signal, and its parent is
// no longer `parent_at_start`, the launcher), or ProbeTcpConnect refused by every one of
// `addresses` (a sharded server's shards, or the one server). A process orphaned without a
// parent-death signal (a shell that exited) is not taken for a launcher's death.
std::unique_ptr<ServerPresence> ProbeServerPresence(std::vector<std::string> addresses,
                                                    pid_t parent_at_start,
                                                    absl::Duration probe_timeout);

}  // namespace convoy::agent

#endif  // CONVOY_AGENT_CLIENT_SERVER_PRESENCE_H_
