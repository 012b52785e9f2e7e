# convoy_replay: replay memory (frames stored once, n-step, prioritized), its sum tree and the background
# minibatch sampler. Included from agent/CMakeLists.txt.
add_library(convoy_replay STATIC
  ${CMAKE_CURRENT_LIST_DIR}/batch_sampler.cc
  ${CMAKE_CURRENT_LIST_DIR}/replay_memory.cc
  ${CMAKE_CURRENT_LIST_DIR}/sum_tree.cc
)
target_link_libraries(convoy_replay PUBLIC convoy_base ${TORCH_LIBRARIES})
convoy_target_defaults(convoy_replay)
