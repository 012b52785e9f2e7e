// OutageBacklog: the updates a server missed add up as it would have applied them.
#include "agent/client/outage_backlog.h"

#include <vector>

#include "tests/catch.h"

namespace convoy::agent {
namespace {

TEST_CASE("A new backlog owes nothing and pays with an empty update") {
  OutageBacklog backlog(PushMode::kGradients);
  CHECK(backlog.empty());
  std::vector<float> update = {1.0f};
  CHECK(backlog.Take(&update) == 0);
  CHECK(update.empty());
}

TEST_CASE("Missed mean gradients are paid as their minibatch-weighted mean") {
  OutageBacklog backlog(PushMode::kGradients);
  backlog.Add(std::vector<float>{1.0f, 2.0f}, 1);
  backlog.Add(std::vector<float>{4.0f, 8.0f}, 3);
  CHECK_FALSE(backlog.empty());
  CHECK(backlog.minibatches() == 4);
  std::vector<float> update;
  CHECK(backlog.Take(&update) == 4);
  CHECK(update == std::vector<float>{(1.0f + 12.0f) / 4, (2.0f + 24.0f) / 4});
}

TEST_CASE("Missed weight changes are paid as their sum") {
  OutageBacklog backlog(PushMode::kDeltas);
  backlog.Add(std::vector<float>{1.0f, -1.0f}, 2);
  backlog.Add(std::vector<float>{0.5f, 0.5f}, 5);
  std::vector<float> update;
  CHECK(backlog.Take(&update) == 7);
  CHECK(update == std::vector<float>{1.5f, -0.5f});
}

TEST_CASE("Taking the backlog empties it, and it fills again from nothing") {
  OutageBacklog backlog(PushMode::kGradients);
  backlog.Add(std::vector<float>{3.0f}, 1);
  std::vector<float> update;
  backlog.Take(&update);
  CHECK(backlog.empty());
  backlog.Add(std::vector<float>{5.0f}, 1);
  CHECK(backlog.Take(&update) == 1);
  CHECK(update == std::vector<float>{5.0f});
}

}  // namespace
}  // namespace convoy::agent
