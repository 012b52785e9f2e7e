# The agent's own tests: preprocessing, the agent loop against real servers, and learning (the learner's
# are in learner.cmake).
add_executable(agent_tests
  ${CMAKE_CURRENT_LIST_DIR}/agent_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/environment/environment_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/evaluation/episode_video_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/evaluation/eval_statistics_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/evaluation/evaluation_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/environment/preprocess_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/client/ps_transport_test.cc
)
target_link_libraries(agent_tests PRIVATE
  convoy_agent convoy_evaluation convoy_param_server convoy_test_support convoy_test_main GIF::GIF)
target_compile_definitions(agent_tests PRIVATE
  CONVOY_PS_BINARY="$<TARGET_FILE:convoy_ps>"
  CONVOY_SIM_BINARY="$<TARGET_FILE:convoy_sim>")
add_dependencies(agent_tests convoy_ps convoy_sim)
convoy_target_defaults(agent_tests)
convoy_catch_tests(agent_tests "agent:" TIER process)

add_executable(learning_tests ${CMAKE_CURRENT_LIST_DIR}/learning_test.cc)
target_link_libraries(learning_tests PRIVATE convoy_test_support convoy_test_main)
target_compile_definitions(learning_tests PRIVATE
  CONVOY_TRAIN_BINARY="$<TARGET_FILE:convoy_train>"
  CONVOY_EVAL_BINARY="$<TARGET_FILE:convoy_eval>")
add_dependencies(learning_tests convoy_train convoy_ps convoy_agent_main convoy_eval)
convoy_target_defaults(learning_tests)
convoy_catch_tests(learning_tests "learning:" TIER system PROPERTIES TIMEOUT 1500)

# The agent's sync with the parameter server as logic alone: no server, no simulator, no wall clock
# (the sharded session's tests wait for its shards' threads; no time is in any assertion).
add_executable(agent_sync_tests
  ${CMAKE_CURRENT_LIST_DIR}/agent_metrics_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/client/outage_backlog_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/client/parameter_server_sync_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/client/push_log_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/client/server_presence_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/client/rejoin_pacer_test.cc
)
target_link_libraries(agent_sync_tests PRIVATE convoy_agent convoy_agent_metrics convoy_test_main)
convoy_target_defaults(agent_sync_tests)
convoy_catch_tests(agent_sync_tests "agent:" TIER unit)
