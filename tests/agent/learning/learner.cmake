# learner_tests: DqnLearner and --device resolution (convoy_learner, convoy_device: LibTorch, no gRPC). The
# CUDA test cases report Skipped without a GPU (tests/skip.h). Included from tests/agent/CMakeLists.txt, and
# from tests/CMakeLists.txt in the learner-only build.
add_executable(learner_tests
  ${CMAKE_CURRENT_LIST_DIR}/device_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/learner_test.cc
)
target_link_libraries(learner_tests PRIVATE convoy_learner convoy_device convoy_test_main)
convoy_target_defaults(learner_tests)
convoy_catch_tests(learner_tests "agent:" TIER unit)
