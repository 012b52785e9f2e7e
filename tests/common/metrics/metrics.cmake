# metrics_tests: CSV/TensorBoard metrics, event files, the GPU monitor and the table of Prometheus metrics.

# A stand-in NVML library, loaded by GpuMonitor in the tests in place of libnvidia-ml.so.1.
add_library(convoy_fake_nvml MODULE ${CMAKE_CURRENT_LIST_DIR}/fake_nvml.cc)
convoy_target_defaults(convoy_fake_nvml)

add_executable(metrics_tests
  ${CMAKE_CURRENT_LIST_DIR}/gpu_monitor_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/metric_table_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/metrics_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/tfevents_test.cc
)
target_link_libraries(metrics_tests PRIVATE
  convoy_metrics convoy_prometheus convoy_gpu_monitor convoy_test_support convoy_test_main)
target_compile_definitions(metrics_tests PRIVATE
                           CONVOY_FAKE_NVML_PATH="$<TARGET_FILE:convoy_fake_nvml>"
                           CONVOY_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
add_dependencies(metrics_tests convoy_fake_nvml)
convoy_target_defaults(metrics_tests)
convoy_catch_tests(metrics_tests "metrics:" TIER unit)
