# model_tests: the model registry, the Q-networks and their flat layout (convoy_model: LibTorch, no gRPC).
# Included from tests/common/CMakeLists.txt, and from tests/CMakeLists.txt in the learner-only build.
add_executable(model_tests ${CMAKE_CURRENT_LIST_DIR}/model_registry_test.cc)
target_link_libraries(model_tests PRIVATE convoy_model convoy_test_main)
convoy_target_defaults(model_tests)
convoy_catch_tests(model_tests "common:" TIER unit)
