#include "param_server/core/optimizer.h"

#include <cmath>
#include <vector>

#include "tests/catch.h"

namespace convoy::ps {
namespace {

std::unique_ptr<FlatOptimizer> Make(const OptimizerOptions& options, std::vector<float>& w) {
  absl::StatusOr<std::unique_ptr<FlatOptimizer>> optimizer =
      FlatOptimizer::Create(options, w.data(), w.size());
  REQUIRE(optimizer.ok());
  return *std::move(optimizer);
}

void Step(FlatOptimizer& optimizer, std::vector<float> gradient, double lr_scale = 1.0) {
  optimizer.Apply(gradient.data(), lr_scale);
}

TEST_CASE("SGD with momentum matches hand-computed steps", "[optimizer]") {
  OptimizerOptions o;
  o.kind = Optimizer::kSgd;
  o.learning_rate = 0.1;
  o.momentum = 0.9;
  std::vector<float> w = {1.0f, -2.0f};
  auto sgd = Make(o, w);
  Step(*sgd, {0.5f, 1.0f});
  // buf = g; w -= lr * buf
  CHECK(w[0] == Approx(1.0 - 0.1 * 0.5));
  CHECK(w[1] == Approx(-2.0 - 0.1 * 1.0));
  Step(*sgd, {0.5f, 1.0f});
  // buf = 0.9 * buf + g
  CHECK(w[0] == Approx(0.95 - 0.1 * (0.9 * 0.5 + 0.5)));
  CHECK(w[1] == Approx(-2.1 - 0.1 * (0.9 * 1.0 + 1.0)));
}

TEST_CASE("Adam matches hand-computed steps", "[optimizer]") {
  OptimizerOptions o;  // adam, lr 1e-3, betas 0.9/0.999, eps 1e-8
  std::vector<float> w = {0.5f};
  auto adam = Make(o, w);
  const double g1 = 0.2, g2 = -0.4;
  Step(*adam, {static_cast<float>(g1)});
  double m = 0.1 * g1, v = 0.001 * g1 * g1;
  double expected = 0.5 - 1e-3 * (m / 0.1) / (std::sqrt(v / 0.001) + 1e-8);
  CHECK(w[0] == Approx(expected).epsilon(1e-6));
  Step(*adam, {static_cast<float>(g2)});
  m = 0.9 * m + 0.1 * g2;
  v = 0.999 * v + 0.001 * g2 * g2;
  const double m_hat = m / (1 - 0.9 * 0.9), v_hat = v / (1 - 0.999 * 0.999);
  expected -= 1e-3 * m_hat / (std::sqrt(v_hat) + 1e-8);
  CHECK(w[0] == Approx(expected).epsilon(1e-6));
}

TEST_CASE("RMSprop without momentum matches a hand-computed step", "[optimizer]") {
  OptimizerOptions o;
  o.kind = Optimizer::kRmsprop;
  o.learning_rate = 0.01;
  o.momentum = 0;
  o.rmsprop_alpha = 0.99;
  std::vector<float> w = {1.0f};
  auto rmsprop = Make(o, w);
  Step(*rmsprop, {2.0f});
  const double square_avg = 0.01 * 4.0;
  CHECK(w[0] == Approx(1.0 - 0.01 * 2.0 / (std::sqrt(square_avg) + 1e-8)));
}

TEST_CASE("The delta rule adds the pushed tensor, scaled", "[optimizer]") {
  OptimizerOptions o;
  o.kind = Optimizer::kDelta;
  std::vector<float> w = {1.0f, 2.0f};
  auto delta = Make(o, w);
  Step(*delta, {0.5f, -1.0f});
  CHECK(w == std::vector<float>{1.5f, 1.0f});
  Step(*delta, {1.0f, 1.0f}, 0.5);
  CHECK(w == std::vector<float>{2.0f, 1.5f});
}

TEST_CASE("Staleness scaling multiplies the learning rate", "[optimizer]") {
  OptimizerOptions o;
  o.kind = Optimizer::kSgd;
  o.momentum = 0;
  o.learning_rate = 1.0;
  std::vector<float> w = {0.0f};
  auto sgd = Make(o, w);
  Step(*sgd, {1.0f}, 0.25);
  CHECK(w[0] == Approx(-0.25));
}

TEST_CASE("Gradient-norm clipping scales the pushed gradient to the limit", "[optimizer]") {
  OptimizerOptions o;
  o.kind = Optimizer::kSgd;
  o.momentum = 0;
  o.learning_rate = 1.0;
  o.max_grad_norm = 1.0;
  std::vector<float> w = {0.0f, 0.0f};
  auto sgd = Make(o, w);
  Step(*sgd, {3.0f, 4.0f});  // Norm 5, clipped to 1.
  CHECK(w[0] == Approx(-0.6).epsilon(1e-5));
  CHECK(w[1] == Approx(-0.8).epsilon(1e-5));
  Step(*sgd, {0.3f, 0.4f});  // Norm 0.5, untouched.
  CHECK(w[0] == Approx(-0.9).epsilon(1e-5));
}

TEST_CASE("Weight decay adds an L2 term to SGD", "[optimizer]") {
  OptimizerOptions o;
  o.kind = Optimizer::kSgd;
  o.momentum = 0;
  o.learning_rate = 0.1;
  o.weight_decay = 0.5;
  std::vector<float> w = {2.0f};
  auto sgd = Make(o, w);
  Step(*sgd, {0.0f});
  CHECK(w[0] == Approx(2.0 - 0.1 * 0.5 * 2.0));
}

TEST_CASE("Restored optimizer state continues exactly where it left off", "[optimizer]") {
  for (Optimizer kind : {Optimizer::kAdam, Optimizer::kAdamW, Optimizer::kRmsprop, Optimizer::kSgd}) {
    INFO(OptimizerName(kind));
    OptimizerOptions o;
    o.kind = kind;
    std::vector<float> a = {0.1f, 0.2f, 0.3f}, b = a;
    auto opt_a = Make(o, a);
    auto opt_b = Make(o, b);
    Step(*opt_a, {0.1f, -0.2f, 0.3f});
    Step(*opt_b, {0.1f, -0.2f, 0.3f});
    absl::StatusOr<std::string> state = opt_b->SaveState();
    REQUIRE(state.ok());
    std::vector<float> c = b;
    auto opt_c = Make(o, c);
    REQUIRE(opt_c->RestoreState(*state).ok());
    Step(*opt_a, {-0.3f, 0.2f, 0.1f});
    Step(*opt_c, {-0.3f, 0.2f, 0.1f});
    CHECK(a == c);
  }
}

TEST_CASE("Bad optimizer options are refused, naming the option", "[optimizer]") {
  CHECK_THAT(std::string(ParseOptimizer("adagrad").status().message()),
             Catch::Matchers::ContainsSubstring("adagrad"));
  OptimizerOptions o;
  o.learning_rate = 0;
  CHECK_THAT(std::string(ValidateOptimizerOptions(o).message()),
             Catch::Matchers::ContainsSubstring("learning rate"));
  o = OptimizerOptions();
  o.beta1 = 1.0;
  CHECK(ValidateOptimizerOptions(o).code() == absl::StatusCode::kInvalidArgument);
  std::vector<float> w(1);
  CHECK(ParseOptimizer("bogus").status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(FlatOptimizer::Create(o, w.data(), 1).status().code() ==
        absl::StatusCode::kInvalidArgument);
}

TEST_CASE("Every optimizer's name parses back to it, as a flag too, and nothing else does",
          "[optimizer]") {
  for (Optimizer kind : {Optimizer::kAdam, Optimizer::kAdamW, Optimizer::kRmsprop, Optimizer::kSgd,
                         Optimizer::kDelta}) {
    const std::string name(OptimizerName(kind));
    INFO(name);
    absl::StatusOr<Optimizer> parsed = ParseOptimizer(name);
    REQUIRE(parsed.ok());
    CHECK(*parsed == kind);
    Optimizer flag = kind == Optimizer::kSgd ? Optimizer::kAdam : Optimizer::kSgd;
    std::string error;
    CHECK(AbslParseFlag(AbslUnparseFlag(kind), &flag, &error));
    CHECK(flag == kind);
  }
  Optimizer flag = Optimizer::kSgd;
  std::string error;
  // Case, whitespace and near-misses are refused, and the flag keeps its value.
  for (const char* wrong : {"Adam", "sgd ", "", "adam_w", "momentum"}) {
    INFO(wrong);
    CHECK(!AbslParseFlag(wrong, &flag, &error));
    CHECK_THAT(error,
               Catch::Matchers::ContainsSubstring("expected adam, adamw, rmsprop, sgd or delta"));
    CHECK(flag == Optimizer::kSgd);
  }
}

}  // namespace
}  // namespace convoy::ps
