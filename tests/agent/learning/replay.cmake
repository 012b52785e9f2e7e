# replay_tests: ReplayMemory, SumTree and BatchSampler. Included from tests/agent/CMakeLists.txt, and from
# tests/CMakeLists.txt in the learner-only build.
add_executable(replay_tests
  ${CMAKE_CURRENT_LIST_DIR}/batch_sampler_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/replay_memory_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/sum_tree_test.cc
)
target_link_libraries(replay_tests PRIVATE convoy_replay convoy_test_main)
convoy_target_defaults(replay_tests)
# The CUDA test case reports Skipped without a GPU (tests/skip.h).
convoy_catch_tests(replay_tests "replay:" TIER unit)

# replay_checkpoint_tests: the replay checkpoint (convoy_replay_checkpoint, not in the learner-only build).
# The tests check the file's digest against convoy_digest's SHA-256 and write bodies with zlib.
if(NOT CONVOY_LEARNER_ONLY)
  find_package(ZLIB REQUIRED)
  add_executable(replay_checkpoint_tests ${CMAKE_CURRENT_LIST_DIR}/replay_checkpoint_test.cc)
  target_link_libraries(replay_checkpoint_tests PRIVATE
    convoy_replay_checkpoint convoy_digest convoy_test_main ZLIB::ZLIB)
  convoy_target_defaults(replay_checkpoint_tests)
  convoy_catch_tests(replay_checkpoint_tests "replay:" TIER unit)
endif()
