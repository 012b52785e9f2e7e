# The library layering, declared once: what each of convoy's targets may not reach. The top-level
# CMakeLists.txt includes this file after every directory has defined its targets.
#
# Each rule is checked twice from this one declaration:
#   - at configure time, on the target's link closure (its LINK_LIBRARIES and every
#     INTERFACE_LINK_LIBRARIES below them): a new edge that breaks a rule fails the configure step;
#   - for the executables among the targets, on the built binary's DT_NEEDED entries:
#     tests/deploy/layering_test.sh reads the checks this file writes to <build>/layering_checks.txt.
# It also writes the library graph docs/architecture.md shows (<build>/library_graph.mmd; the same test
# keeps the two equal).

# Per forbidden dependency: the link-closure items that are it, and the shared libraries that are it.
set(convoy_forbidden_libtorch "^(torch|torch_cpu|torch_cuda|torch_library|c10|c10_cuda)$|libtorch|libc10")
set(convoy_needed_libtorch "^lib(torch|c10)")
set(convoy_forbidden_grpc "^gRPC::|^convoy_grpc_proto$|libgrpc")
set(convoy_needed_grpc "^lib(grpc|gpr)")
set(convoy_forbidden_openssl "^OpenSSL::|libssl|libcrypto")
set(convoy_needed_openssl "^lib(ssl|crypto)\\.")
set(convoy_forbidden_protobuf "^protobuf::|libprotobuf")
set(convoy_needed_protobuf "^libprotobuf")

# The targets (and library paths) `target` links, directly or through its dependencies.
function(convoy_link_closure target out)
  set(seen)
  set(queue ${target})
  while(queue)
    list(POP_FRONT queue item)
    # $<LINK_ONLY:x> is still a link of x; any other generator expression is not part of this build's graph.
    string(REGEX REPLACE "^\\$<LINK_ONLY:([^>]+)>$" "\\1" item "${item}")
    if(item MATCHES "^\\$<" OR item IN_LIST seen)
      continue()
    endif()
    list(APPEND seen ${item})
    if(NOT TARGET ${item})
      continue()
    endif()
    get_target_property(aliased ${item} ALIASED_TARGET)
    if(aliased)
      list(APPEND queue ${aliased})
      continue()
    endif()
    get_target_property(imported ${item} IMPORTED)
    get_target_property(type ${item} TYPE)
    if(NOT imported AND NOT type STREQUAL "INTERFACE_LIBRARY")
      get_target_property(links ${item} LINK_LIBRARIES)
      if(links)
        list(APPEND queue ${links})
      endif()
    endif()
    get_target_property(links ${item} INTERFACE_LINK_LIBRARIES)
    if(links)
      list(APPEND queue ${links})
    endif()
  endwhile()
  list(REMOVE_ITEM seen ${target})
  set(${out} ${seen} PARENT_SCOPE)
endfunction()

# The rule: `target` reaches none of ARGN (libtorch, grpc, openssl, protobuf). Fails the configure step
# when it does; an executable's binary is also listed for the DT_NEEDED check.
function(convoy_forbid_links target)
  convoy_link_closure(${target} closure)
  foreach(rule ${ARGN})
    foreach(item ${closure})
      if(item MATCHES "${convoy_forbidden_${rule}}")
        message(FATAL_ERROR "layering: ${target} must not link ${rule}, but reaches ${item}")
      endif()
    endforeach()
  endforeach()
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "EXECUTABLE")
    foreach(rule ${ARGN})
      set_property(GLOBAL APPEND_STRING PROPERTY convoy_layering_checks
                   "$<TARGET_FILE:${target}>\t${rule}\t${convoy_needed_${rule}}\n")
    endforeach()
  endif()
endfunction()

# Set only by tests/deploy/layering_test.sh, to see the check fail on an edge that breaks a rule.
if(CONVOY_LAYERING_PROBE)
  target_link_libraries(convoy_base PUBLIC gRPC::grpc++)
endif()

# The rules.
convoy_forbid_links(convoy_base libtorch grpc openssl)
convoy_forbid_links(convoy_digest libtorch grpc)
convoy_forbid_links(convoy_model grpc)
convoy_forbid_links(convoy_gpu_monitor libtorch grpc openssl)
convoy_forbid_links(convoy_replay grpc openssl)
convoy_forbid_links(convoy_device grpc openssl)
convoy_forbid_links(convoy_learner grpc)
# The learner-only build defines none of the targets below.
if(NOT CONVOY_LEARNER_ONLY)
  convoy_forbid_links(convoy_exploration libtorch grpc openssl)
  convoy_forbid_links(convoy_tensor_encoding grpc openssl)
  convoy_forbid_links(convoy_metrics libtorch grpc openssl)
  convoy_forbid_links(convoy_simulator_bridge libtorch grpc openssl)
  convoy_forbid_links(convoy_param_server_core grpc)
  # Executables, whose DT_NEEDED is checked as well: the simulator alone and its tests, the
  # parameter server's core tests, the metrics' tests.
  convoy_forbid_links(convoy_sim libtorch grpc openssl protobuf)
  if(TARGET convoy_simulator_bridge_test)  # The tests are there with Catch2.
    convoy_forbid_links(convoy_simulator_bridge_test libtorch grpc openssl protobuf)
    convoy_forbid_links(param_server_tests grpc)
    convoy_forbid_links(metrics_tests libtorch grpc)
  endif()
  get_property(convoy_layering_checks GLOBAL PROPERTY convoy_layering_checks)
  file(GENERATE OUTPUT ${CMAKE_BINARY_DIR}/layering_checks.txt CONTENT "${convoy_layering_checks}")
endif()

# The library graph as the build has it, for docs/architecture.md: each of convoy's libraries, the
# convoy libraries it links directly, and the heavy outside dependencies it links directly. Abseil,
# glog and the C++ runtime go everywhere and are left out.
# Every static library defined outside tests/ and bench/, in the order the directories define them.
function(convoy_collect_libraries directory out)
  set(found)
  get_property(targets DIRECTORY ${directory} PROPERTY BUILDSYSTEM_TARGETS)
  foreach(target ${targets})
    get_target_property(type ${target} TYPE)
    if(type STREQUAL "STATIC_LIBRARY")
      list(APPEND found ${target})
    endif()
  endforeach()
  get_property(subdirectories DIRECTORY ${directory} PROPERTY SUBDIRECTORIES)
  foreach(subdirectory ${subdirectories})
    if(NOT subdirectory MATCHES "^${PROJECT_SOURCE_DIR}/(tests|bench)(/|$)")
      convoy_collect_libraries(${subdirectory} below)
      list(APPEND found ${below})
    endif()
  endforeach()
  set(${out} ${found} PARENT_SCOPE)
endfunction()
convoy_collect_libraries(${PROJECT_SOURCE_DIR} convoy_libraries)
set(convoy_graph "graph BT\n")
foreach(library ${convoy_libraries})
  get_target_property(links ${library} LINK_LIBRARIES)
  set(outside)
  foreach(link ${links})
    if(link IN_LIST convoy_libraries)
      string(APPEND convoy_graph "  ${library} --> ${link}\n")
    elseif(link MATCHES "${convoy_forbidden_libtorch}")
      list(APPEND outside LibTorch)
    elseif(link MATCHES "${convoy_forbidden_grpc}")
      list(APPEND outside gRPC)
    elseif(link MATCHES "${convoy_forbidden_openssl}")
      list(APPEND outside OpenSSL)
    elseif(link MATCHES "^protobuf::")
      list(APPEND outside Protobuf)
    elseif(link MATCHES "^msgpack")
      list(APPEND outside msgpack)
    elseif(link MATCHES "^(ZLIB|PNG|GIF)::|isal")
      list(APPEND outside ${link})
    endif()
  endforeach()
  list(REMOVE_DUPLICATES outside)
  string(REPLACE "ZLIB::ZLIB" "zlib" outside "${outside}")
  string(REPLACE "PNG::PNG" "libpng" outside "${outside}")
  string(REPLACE "GIF::GIF" "giflib" outside "${outside}")
  string(REGEX REPLACE "[^;]*libisal[^;]*" "ISA-L" outside "${outside}")
  foreach(dependency ${outside})
    string(APPEND convoy_graph "  ${library} -.-> ${dependency}([${dependency}])\n")
  endforeach()
endforeach()
file(WRITE ${CMAKE_BINARY_DIR}/library_graph.mmd "${convoy_graph}")
