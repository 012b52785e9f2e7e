# convoy_metrics: CSV + TensorBoard metrics and the NVML GPU monitor (no LibTorch in these sources).
# convoy_device: --device resolution for the agents (LibTorch).
find_library(ISAL_LIBRARY isal REQUIRED)
find_path(ISAL_INCLUDE_DIR isa-l/crc.h REQUIRED)

add_library(convoy_metrics STATIC
  ${CMAKE_CURRENT_LIST_DIR}/gpu_monitor.cc
  ${CMAKE_CURRENT_LIST_DIR}/metrics.cc
  ${CMAKE_CURRENT_LIST_DIR}/tfevents.cc
)
target_include_directories(convoy_metrics PUBLIC ${PROJECT_SOURCE_DIR})
target_include_directories(convoy_metrics PRIVATE ${ISAL_INCLUDE_DIR})
target_link_libraries(convoy_metrics PUBLIC convoy_common convoy_proto ${ISAL_LIBRARY} ${CMAKE_DL_LIBS})
convoy_target_defaults(convoy_metrics)

add_library(convoy_device STATIC ${PROJECT_SOURCE_DIR}/agent/device.cc)
target_include_directories(convoy_device PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(convoy_device PUBLIC convoy_common)
if(CONVOY_HAVE_CUDA_TORCH)
  # DescribeDevice reads the GPU's name and memory through ATen's CUDA API.
  target_compile_definitions(convoy_device PRIVATE CONVOY_HAVE_CUDA_TORCH=1)
endif()
convoy_target_defaults(convoy_device)
