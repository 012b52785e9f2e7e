// The suite's one way into Catch2, v2 (Debian 12: 2.13, a single header) or v3 (Debian 13: 3.x, a
// library with headers by part). Every test source includes this instead of Catch2's own headers,
// and is written once:
//   - assertions, sections, generators and Approx as both versions spell them (Approx unqualified);
//   - `Catch::Matchers::ContainsSubstring` for a string matcher: v3's name, given to v2 here.
// The test main (test_main.cc) defines CONVOY_CATCH_MAIN before including this: it gets the session
// and `convoy::testing::ListenerBase`, the base of its event listener, and under v2 the runner's
// code.
#ifndef CONVOY_TESTS_CATCH_H_
#define CONVOY_TESTS_CATCH_H_

// The build says which Catch2 it found (tests/CMakeLists.txt); a source compiled outside it guesses
// from the headers it can see.
#ifndef CONVOY_CATCH2_MAJOR
#if __has_include(<catch2/catch_test_macros.hpp>)
#define CONVOY_CATCH2_MAJOR 3
#else
#define CONVOY_CATCH2_MAJOR 2
#endif
#endif

#if CONVOY_CATCH2_MAJOR >= 3
#include <catch2/catch_approx.hpp>
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

// v2 had Approx at global scope; the suite's tests spell it so.
using Catch::Approx;

#ifdef CONVOY_CATCH_MAIN
#include <catch2/catch_session.hpp>
#include <catch2/reporters/catch_reporter_event_listener.hpp>
#include <catch2/reporters/catch_reporter_registrars.hpp>

namespace convoy::testing {
using ListenerBase = Catch::EventListenerBase;
}  // namespace convoy::testing
#endif

#else  // v2
#ifdef CONVOY_CATCH_MAIN
#define CATCH_CONFIG_RUNNER
#endif
#include <catch2/catch.hpp>

namespace Catch::Matchers {
// v3's name for v2's string Contains.
inline StdString::ContainsMatcher ContainsSubstring(
    const std::string& text, CaseSensitive::Choice sensitivity = CaseSensitive::Yes) {
  return Contains(text, sensitivity);
}
}  // namespace Catch::Matchers

#ifdef CONVOY_CATCH_MAIN
namespace convoy::testing {
using ListenerBase = Catch::TestEventListenerBase;
}  // namespace convoy::testing
#endif
#endif

#endif  // CONVOY_TESTS_CATCH_H_
