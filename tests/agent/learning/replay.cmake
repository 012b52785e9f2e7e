# replay_tests: ReplayMemory (and its checkpoints), SumTree and BatchSampler. Included from
# tests/agent/CMakeLists.txt, and from tests/CMakeLists.txt in the learner-only build. The checkpoint
# tests check the file's digest against convoy_digest's SHA-256 and write bodies with zlib.
find_package(ZLIB REQUIRED)
add_executable(replay_tests
  ${CMAKE_CURRENT_LIST_DIR}/batch_sampler_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/replay_checkpoint_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/replay_memory_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/sum_tree_test.cc
)
target_link_libraries(replay_tests PRIVATE convoy_replay convoy_digest convoy_test_main ZLIB::ZLIB)
convoy_target_defaults(replay_tests)
# The CUDA test case reports Skipped without a GPU (tests/skip.h).
convoy_catch_tests(replay_tests "replay:" TIER unit)
